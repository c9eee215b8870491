"""`coded reproduce` and `coded plot` on damaged folders and files: what each damage leads to.

Part 1 runs ``coded reproduce --quick --only NAMES`` once into a fresh folder, then for each
damage of ``FOLDER_DAMAGES`` in ``tests/damages.py`` (a CSV cut short, a manifest that is
``[]`` or lacks ``seconds``, a corrupt PNG, ...) copies that folder, damages one file of one
experiment and runs ``coded reproduce`` on it again. The outcome: a traceback (its type), or
the damaged experiment's status in the report (rerun / reused / failed), whether a line named
the damaged file, claims missing from the report against the undamaged run, and a reused
experiment whose measured figures changed (stale).

Part 2 runs ``coded plot`` on every damage of ``csv_damages`` in ``tests/damages.py`` (NaN,
infinity, an empty cell, text, a negative number and zero in each column a figure reads, the
column dropped, one row, the header only, the last line cut) of each CSV, and counts the
outcomes: a traceback (its type), one line and exit status 2, a figure that says it left rows
out, or a figure that says nothing.

Usage: python tests/drivers/damaged_reports.py [--only polynomial,rates] [--csvs DIR]
       [--skip-folders] [--skip-plots] [--seed 0]
The CSVs damaged are the small ones of ``tests/damages.py``, one per experiment; ``--csvs DIR``
takes them from DIR instead (``coded experiment NAME --quick --out DIR``). Run it with
``PYTHONPATH=<another checkout>/src`` to measure another version of the library: the
damages import nothing of it.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from typer.testing import CliRunner

import codedcomputing
from codedcomputing.cli import app
from codedcomputing.experiments import EXPERIMENTS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from damages import FOLDER_DAMAGES, SMALL, claim_table, counts_add_up, csv_damages, small_csv  # tests/, above

runner = CliRunner()
WIDE = {"COLUMNS": "200"}
# columns the figures and headlines read beyond some versions' COLUMNS: damaged as well
ALSO_READ = {
    "latency": ("num_inputs", "num_workers", "encode_s", "decode_s"),
    "gradient-coding": ("compute_s", "dataset", "target_step"),
}


def claim_rows(markdown: str) -> list[tuple[str, str, str]]:
    """(claim, measured, verdict) of every claim table row of a report.md."""
    return [(claim, measured, verdict) for claim, measured, _, verdict in claim_table(markdown)]


def status_of(markdown: str, name: str) -> str:
    found = re.search(rf"^\| {re.escape(name)} \| (\w+) \|", markdown, re.MULTILINE)
    return found.group(1) if found else "absent"


def reproduce(folder: Path, only: str):
    return runner.invoke(app, ["reproduce", "--quick", "--only", only, "--out", str(folder)], env=WIDE)


def folder_cases(only: str, work: Path) -> list[tuple[str, str, str]]:
    base = work / "base"
    started = time.perf_counter()
    result = reproduce(base, only)
    if result.exit_code != 0:
        raise SystemExit(f"the undamaged run failed:\n{result.output}")
    print(f"undamaged run: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    base_report = (base / "report.md").read_text()
    base_claims = {claim: (measured, verdict) for claim, measured, verdict in claim_rows(base_report)}
    table = []
    for damage_name, damage in FOLDER_DAMAGES.items():
        for name in only.split(","):
            folder = work / "case"
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(base, folder, ignore=shutil.ignore_patterns("report.*"))
            file = damage(folder, name)
            if file is None:
                continue
            result = reproduce(folder, only)
            table.append((damage_name, name, outcome(result, folder, name, file, base_claims)))
            print(f"{damage_name} [{name}]: {table[-1][2]}", file=sys.stderr)
    return table


def outcome(result, folder: Path, name: str, file: str, base_claims: dict) -> str:
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return f"traceback: {type(result.exception).__name__}"
    report = folder / "report.md"
    if not report.is_file():
        named = "naming the file" if file in result.output else "not naming the file"
        return f"exit {result.exit_code} without a report, {named}"
    markdown = report.read_text()
    status = status_of(markdown, name)
    status = {"ran": "rerun"}.get(status, status)
    said = [line for line in result.output.splitlines() if file in line]
    if len(said) == 1:
        parts = [f"{status} (one line naming the file)"]
    elif not said and file in markdown:
        parts = [f"{status} (the report names the file)"]
    else:
        parts = [f"{status} ({len(said)} lines name it)"]
    claims = {claim: (measured, verdict) for claim, measured, verdict in claim_rows(markdown)}
    missing = [claim for claim in base_claims if claim not in claims]
    if missing:
        parts.append(f"{len(missing)} claim(s) missing")
    if status == "reused":
        stale = [c for c in claims if c in base_claims and claims[c] != base_claims[c]]
        if stale:
            parts.append(f"{len(stale)} claim(s) from the damaged CSV")
    if not counts_add_up(markdown):
        parts.append("summary counts do not add up")
    if result.exit_code != 0:
        parts.append(f"exit {result.exit_code}")
    return "; ".join(parts)


def plot_outcome(result) -> str:
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return f"traceback: {type(result.exception).__name__}"
    lines = [line for line in result.output.splitlines() if line.startswith("coded plot:")]
    if result.exit_code == 2:
        return "exit 2, one line" if len(lines) == 1 and "Traceback" not in result.output else "exit 2, other"
    if result.exit_code == 0:
        return "figure, says rows left out" if any("left out" in line for line in lines) else "figure"
    return f"exit {result.exit_code}"


def plot_cases(csvs: dict[str, Path], work: Path, seed: int) -> dict[str, Counter]:
    table: dict[str, Counter] = {}
    tracebacks = []
    for name, path in csvs.items():
        text = path.read_text()
        read = {*EXPERIMENTS[name].COLUMNS, *ALSO_READ.get(name, ())}
        columns = [column for column in text.splitlines()[0].split(",") if column in read]  # the file's order
        cases = csv_damages(text, columns, random.Random(seed))
        counter = table.setdefault(name, Counter())
        started = time.perf_counter()
        for case, text in cases.items():
            damaged = work / "plot" / f"{name}.csv"
            damaged.parent.mkdir(parents=True, exist_ok=True)
            damaged.write_text(text)
            result = runner.invoke(
                app, ["plot", str(damaged), "--out", str(work / "plot" / "figures")], env=WIDE
            )
            got = plot_outcome(result)
            counter[got] += 1
            if got.startswith("traceback"):
                tracebacks.append(f"{name}: {case}: {got}: {result.exception}"[:160])
        print(f"{name}: {len(cases)} damaged CSVs in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    for line in tracebacks:
        print("  " + line)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default="polynomial,rates")
    parser.add_argument("--csvs", type=Path, default=None)
    parser.add_argument("--skip-folders", action="store_true")
    parser.add_argument("--skip-plots", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"codedcomputing {codedcomputing.__version__} from {Path(codedcomputing.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if not args.skip_folders:
            rows = folder_cases(args.only, work)
            width = max(len(damage) for damage, _, _ in rows) + 2
            print(f"\n{'damage':<{width}}{'experiment':<13}outcome")
            for damage, name, got in rows:
                print(f"{damage:<{width}}{name:<13}{got}")
        if not args.skip_plots:
            if args.csvs is not None:
                csvs = {p.stem: p for p in sorted(args.csvs.glob("*.csv")) if p.stem in EXPERIMENTS}
            else:  # the small CSVs the plot test builds, one per experiment
                (work / "small").mkdir()
                csvs = {name: work / "small" / f"{name}.csv" for name in SMALL}
                for name in SMALL:
                    small_csv(name, work / "small")
            print()
            table = plot_cases(csvs, work, args.seed)
            kinds = sorted({kind for counter in table.values() for kind in counter})
            print(f"\n{'experiment':<17}{'cases':>6}  " + "  ".join(f"{k:>26}" for k in kinds))
            for name, counter in table.items():
                cells = "  ".join(f"{counter[k]:>26}" for k in kinds)
                print(f"{name:<17}{sum(counter.values()):>6}  {cells}")


if __name__ == "__main__":
    main()
