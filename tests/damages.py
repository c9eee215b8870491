"""Damaged files for the tests of `coded plot` and `coded reproduce`, and for
``tests/drivers/damaged_reports.py``, which applies every one of them: :func:`csv_damages` (a
CSV's cells, columns and lines), :data:`FOLDER_DAMAGES` (one file of a finished experiment's
folder), the small CSVs of :data:`SMALL` they are applied to, and the reading of the report's
claim tables (:func:`claim_table`, :func:`counts_add_up`).

It imports nothing of the library at module level, so that the benchmark can measure another
version of it (``PYTHONPATH=<another checkout>/src``).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import random
import re
from pathlib import Path

# -- CSV text ----------------------------------------------------------------------------------------


def csv_rows(text: str) -> tuple[list[str], list[list[str]]]:
    """The header and the non-empty records of the CSV ``text``."""
    table = list(csv.reader(io.StringIO(text)))
    return table[0], [row for row in table[1:] if row]


def csv_text(header: list[str], rows: list[list[str]]) -> str:
    """``header`` and ``rows`` as CSV text, one line each."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, *rows])
    return out.getvalue()


def cut_last_line(text: str) -> str:
    """``text`` with its last line cut in half, as a file whose writing stopped ends."""
    whole = text.rstrip("\n")
    return whole[: len(whole) - len(whole.splitlines()[-1]) // 2] + "\n"


# -- damaged CSVs: what `coded plot` is given ---------------------------------------------------------

CELL_DAMAGES = {
    "nan": "nan",
    "inf": "inf",
    "empty": "",
    "text": "abc",
    "negative": "-1.5",
    "zero": "0",
}


def csv_damages(text: str, columns, rng: random.Random) -> dict[str, str]:
    """Damaged versions of the CSV ``text``, by name: for each of ``columns`` (those a figure
    reads), the cell of one row (drawn from ``rng``) set to each of :data:`CELL_DAMAGES`, and the
    column dropped; NaN in the first row's cell too (figures read their setting from the first
    row); and the whole file as one row, as its header alone, as its first tenth, and with its
    last line cut in half."""
    header, rows = csv_rows(text)
    damaged = {}
    for column in columns:
        if column not in header:
            continue
        index = header.index(column)
        picks = [("a row", rng.randrange(len(rows))), ("row 1", 0)]
        for kind, value in CELL_DAMAGES.items():
            for where, row_index in picks:
                if where == "row 1" and kind != "nan":
                    continue
                copy = [list(row) for row in rows]
                copy[row_index][index] = value
                damaged[f"{column}: {kind} in {where}"] = csv_text(header, copy)
        kept = [i for i in range(len(header)) if i != index]
        damaged[f"{column}: column missing"] = csv_text(
            [header[i] for i in kept], [[row[i] for i in kept] for row in rows]
        )
    damaged["one row"] = csv_text(header, rows[:1])
    damaged["header only"] = csv_text(header, [])
    damaged["first tenth of the rows"] = csv_text(header, rows[: max(2, len(rows) // 10)])
    damaged["last line cut in half"] = cut_last_line(csv_text(header, rows))
    return damaged


# -- small CSVs shaped as each experiment writes them ----------------------------------------------


def _polynomial(rng) -> list[dict]:
    n, threshold = 12, 7  # LCC exact up to S = 5
    return [
        {
            "experiment": "polynomial",
            "function": "quadratic-4-2",
            "scheme": scheme,
            "num_inputs": 4,
            "num_workers": n,
            "num_stragglers": s,
            "recovery_threshold": threshold,
            "trial": trial,
            "seed": 0,
            "mse": (1e-13 if s <= n - threshold else 10.0**s)
            if scheme == "lcc"
            else rng.uniform(0.1, 1) * (1 + s),
            "lambda_enc": 0.0 if scheme == "gcc" else "",
            "lambda_dec": 0.0 if scheme == "gcc" else "",
        }
        for s in (0, 3, 5, 6, 8)
        for trial in range(2)
        for scheme in ("lcc", "gcc", "gcc-natural", "bacc")
    ]


def _rates(rng) -> list[dict]:
    rows = []
    settings = [("worst-case", 2, "", ("gcc", "gcc-natural", "bacc"))]
    settings += [("bernoulli", "", p, ("gcc", "gcc-natural")) for p in (0.1, 0.2)]
    for n in (20, 40, 80):
        for trial in range(2):
            for panel, s, p, schemes in settings:
                for scheme in schemes:
                    rows.append(
                        {
                            "experiment": "rates",
                            "model": "lenet5",
                            "scheme": scheme,
                            "panel": panel,
                            "num_inputs": 10,
                            "num_workers": n,
                            "num_stragglers": s,
                            "p": p,
                            "trial": trial,
                            "seed": 0,
                            "num_alive": n - 2,
                            "mse": rng.uniform(0.5, 2) * n ** (-3.0 if scheme == "gcc" else -2.0),
                            "rel_acc": 1.0,
                            "lambda_enc": 0.0 if scheme != "bacc" else "",
                            "lambda_dec": 0.0 if scheme != "bacc" else "",
                        }
                    )
    return rows


def _latency(rng) -> list[dict]:
    rows = []
    for backend in ("thread", "simulated"):
        schemes = [("uncoded", 10, 0, "complete"), ("replication", 50, 0, "complete")]
        schemes += [(scheme, 50, s, 50 - s) for s in (10, 20) for scheme in ("bacc", "gcc")]
        for scheme, n, s, wait_for in schemes:
            for trial in range(6):
                rows.append(
                    {
                        "experiment": "latency",
                        "backend": backend,
                        "delay_model": "shifted-exp",
                        "model": "lenet5",
                        "scheme": scheme,
                        "num_inputs": 10,
                        "num_workers": n,
                        "num_stragglers": s,
                        "wait_for": wait_for,
                        "trial": trial,
                        "seed": 0,
                        "latency_s": 0.05 * (1 + rng.exponential()) * (2 if wait_for == "complete" else 1),
                        "encode_s": 1e-4,
                        "wait_s": 0.05,
                        "decode_s": 2e-4,
                        "worker_compute_s": 0.01,
                        "rel_acc": 1.0 if wait_for == "complete" else 0.9,
                        "accuracy": 0.95,
                        "mse": 0.0 if wait_for == "complete" else 0.1,
                        "failed": 0,
                        "dropped": 0,
                    }
                )
    return rows


def _stragglers(rng) -> list[dict]:
    return [
        {
            "experiment": "stragglers",
            "model": "lenet5",
            "scheme": scheme,
            "num_inputs": 10,
            "num_workers": 10 if scheme == "uncoded" else 50,
            "num_stragglers": s,
            "trial": trial,
            "seed": 0,
            "mse": 1e-12 if scheme == "replication" else rng.uniform(0.01, 1) * (1 + s),
            "rel_acc": rng.uniform(0.8, 1.0),
            "missing": 0.0,
            "lambda_enc": 0.0 if scheme == "gcc" else "",
            "lambda_dec": 0.0 if scheme == "gcc" else "",
        }
        for s in (0, 5, 10)
        for trial in range(2)
        for scheme in ("gcc", "gcc-natural", "bacc", "replication", "uncoded")
    ]


def _manifold(rng) -> list[dict]:
    return [
        {
            "experiment": "manifold",
            "task": task,
            "scheme": scheme,
            "design": "",
            "reference": 0,
            "num_inputs": 10,
            "num_workers": 50,
            "pattern": pattern,
            "num_stragglers": s,
            "straggler_fraction": s / 50,
            "trial": trial,
            "seed": 0,
            "mse": rng.uniform(0.1, 1) * (1 + s),
            "rel_acc": rng.uniform(0.8, 1.0) if task == "lenet5" else "",
            "layout_s": 0.01 if scheme == "manifold-gcc" else 0.0,
            "lambda_enc": "",
            "lambda_dec": "",
        }
        for task in ("lenet5", "poly-curve")
        for pattern in ("random", "contiguous")
        for s in (0, 10)
        for trial in range(2)
        for scheme in ("gcc", "manifold-gcc", "bacc", "bacc-ordered")
    ]


def _adversarial(rng) -> list[dict]:
    rows = []
    settings = [(a, n, "random") for a in (0.0, 0.5) for n in (50, 100, 200)]
    settings += [(a, n, "concentrated") for a in (0.0, 0.5) for n in (50, 100, 200)]
    settings += [("", 200, "concentrated")]
    for exponent, n, attack in settings:
        for scheme in ("gcc", "bacc", "robust-gcc", "robust-gcc-tukey", "approxifer"):
            for trial in range(2):
                q = 1 if exponent == "" else max(1, round(n**exponent))
                rows.append(
                    {
                        "experiment": "adversarial",
                        "function": "xsinx",
                        "attack": attack,
                        "scheme": scheme,
                        "exponent": exponent,
                        "num_inputs": 9,
                        "num_workers": n,
                        "num_adversaries": q,
                        "bound": 100.0,
                        "lambda_dec": "" if scheme in ("bacc", "approxifer") else 0.0,
                        "scale": "",
                        "trial": trial,
                        "seed": 0,
                        "mse": rng.uniform(0.5, 2) * (q / n) ** 1.2,
                        "decode_s": rng.uniform(1e-4, 1e-3),
                    }
                )
    return rows


def _gradient_coding(rng) -> list[dict]:
    from codedcomputing.experiments.gradient_coding import SCHEMES

    rows = []
    grid = [(s, ratio, "exponential", True, False) for s in (1, 3) for ratio in (1.0, 2.0)]
    sweep = [(2, ratio, "exponential", False, True) for ratio in (0.5, 2.0)]
    bursty = [(s, 1.0, "bursty", False, False) for s in (1, 3)]
    real = [(3, 1.0, "exponential", False, False)]
    for backend, settings in (("simulated", grid + sweep + bursty), ("threads", real)):
        for s, ratio, delays, in_grid, in_sweep in settings:
            for trial in range(2):
                for i, scheme in enumerate(SCHEMES):
                    per_step = (1 + i) * ratio * rng.uniform(0.9, 1.1)
                    for step in range(0, 9):
                        rows.append(
                            {
                                "experiment": "gradient-coding",
                                "dataset": "digits",
                                "backend": backend,
                                "scheme": scheme,
                                "num_workers": 12,
                                "num_stragglers": s,
                                "delay_ratio": ratio,
                                "delays": delays,
                                "model": "logistic",
                                "compute_s": 1e-3,
                                "step": step,
                                "wall_time_s": per_step * step,
                                "step_time_s": per_step,
                                "loss": 1.0 / (1 + step),
                                "trial": trial,
                                "seed": 0,
                                "target_step": 5,
                                "in_grid": in_grid,
                                "in_sweep": in_sweep,
                            }
                        )
    return rows


SMALL = {
    "polynomial": _polynomial,
    "rates": _rates,
    "latency": _latency,
    "stragglers": _stragglers,
    "manifold": _manifold,
    "adversarial": _adversarial,
    "gradient-coding": _gradient_coding,
}


def small_csv(name: str, folder) -> str:
    """The text of a small CSV of experiment ``name`` as its run writes them (every panel of
    its figures drawn), seeded."""
    import numpy as np

    from codedcomputing.experiments.records import write_csv

    path = write_csv(SMALL[name](np.random.default_rng(0)), folder / f"{name}.csv")
    return path.read_text()


# -- damaged folders: what `coded reproduce` finds ---------------------------------------------------


def _rewrite_rows(path: Path, change) -> None:
    """Rewrite the CSV at ``path`` with ``change(header, rows)`` as its rows."""
    header, rows = csv_rows(path.read_text(encoding="utf-8"))
    path.write_text(csv_text(header, change(header, rows)), encoding="utf-8")


def _first_rows(count):
    def damage(folder: Path, name: str) -> str:
        _rewrite_rows(folder / f"{name}.csv", lambda header, rows: rows[:count])
        return f"{name}.csv"

    return damage


def _one_cell_changed(folder: Path, name: str) -> str:
    def change(header, rows):
        index = header.index("mse")
        rows[3][index] = repr(float(rows[3][index]) * 2 + 1)
        return rows

    _rewrite_rows(folder / f"{name}.csv", change)
    return f"{name}.csv"


def _last_line_cut(folder: Path, name: str) -> str:
    path = folder / f"{name}.csv"
    path.write_text(cut_last_line(path.read_text(encoding="utf-8")), encoding="utf-8")
    return path.name


def _write(file: str, data):
    """A damage that replaces ``NAME`` + ``file`` with ``data`` (text or bytes)."""

    def damage(folder: Path, name: str) -> str:
        path = folder / f"{name}{file}"
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
        return path.name

    return damage


def _delete(file: str):
    def damage(folder: Path, name: str) -> str:
        (folder / f"{name}{file}").unlink()
        return f"{name}{file}"

    return damage


def _manifest(change):
    """A damage that loads the manifest, applies ``change`` to it and writes it back."""

    def damage(folder: Path, name: str) -> str:
        path = folder / f"{name}.run.json"
        manifest = json.loads(path.read_text(encoding="utf-8"))
        manifest = change(manifest)
        path.write_text(json.dumps(manifest), encoding="utf-8")
        return path.name

    return damage


def _drop(key):
    return _manifest(lambda m: {k: v for k, v in m.items() if k != key})


def _set(key, value):
    return _manifest(lambda m: {**m, key: value})


def _cut_manifest(folder: Path, name: str) -> str:
    path = folder / f"{name}.run.json"
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    return path.name


def _manifest_a_folder(folder: Path, name: str) -> str:
    path = folder / f"{name}.run.json"
    path.unlink()
    path.mkdir()
    return path.name


def _another_seed(folder: Path, name: str) -> str:
    return _manifest(lambda m: {**m, "fingerprint": {**m["fingerprint"], "seed": 99}})(folder, name)


def _derived_cut(folder: Path, name: str) -> str | None:
    """The first CSV the manifest lists besides the experiment's own (rates: the slopes), cut
    to its header; None where there is none."""
    files = json.loads((folder / f"{name}.run.json").read_text(encoding="utf-8"))["files"]
    others = [file for file in files if file.endswith(".csv") and file != f"{name}.csv"]
    if not others:
        return None
    _rewrite_rows(folder / others[0], lambda header, rows: [])
    return others[0]


def _a_checksum_changed(folder: Path, name: str) -> str:
    def change(manifest):
        if isinstance(manifest.get("checksums"), dict):  # manifests written before checksums have none
            manifest["checksums"][f"{name}.csv"]["sha256"] = "0" * 64
        return manifest

    return _manifest(change)(folder, name)


def _first_png(folder: Path, name: str) -> Path:
    files = json.loads((folder / f"{name}.run.json").read_text(encoding="utf-8"))["files"]
    return folder / next(file for file in files if file.endswith(".png"))


def _png(data_of):
    def damage(folder: Path, name: str) -> str:
        path = _first_png(folder, name)
        path.write_bytes(data_of(path.read_bytes()))
        return path.name

    return damage


def _corrupt_png_signed(folder: Path, name: str) -> str:
    """A corrupt PNG whose manifest's checksum was made to match it: the report still is written."""
    path = _first_png(folder, name)
    path.write_bytes(b"not a png at all")

    def sign(manifest):
        if isinstance(manifest.get("checksums"), dict):
            manifest["checksums"][path.name] = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        return manifest

    _manifest(sign)(folder, name)
    return path.name


# A damage takes the folder and the experiment's name, damages one file and returns its name
# (None where the case does not apply to that experiment).
FOLDER_DAMAGES = {
    "csv: the first 40 rows": _first_rows(40),
    "csv: the first 30 rows": _first_rows(30),
    "csv: one cell changed": _one_cell_changed,
    "csv: last line cut in half": _last_line_cut,
    "csv: header only": _first_rows(0),
    "csv: empty file": _write(".csv", ""),
    "csv: not UTF-8": _write(".csv", b"\xff\xfe\x00garbage"),
    "csv: deleted": _delete(".csv"),
    "derived csv: cut to its header": _derived_cut,
    "manifest: []": _write(".run.json", "[]"),
    "manifest: null": _write(".run.json", "null"),
    "manifest: a string": _write(".run.json", '"done"'),
    "manifest: a number": _write(".run.json", "42"),
    "manifest: {}": _write(".run.json", "{}"),
    "manifest: not JSON (cut in half)": _cut_manifest,
    "manifest: not UTF-8": _write(".run.json", b"\xff\xfe{"),
    "manifest: a folder": _manifest_a_folder,
    "manifest: lacks seconds": _drop("seconds"),
    "manifest: lacks files": _drop("files"),
    "manifest: lacks fingerprint": _drop("fingerprint"),
    "manifest: lacks checksums": _drop("checksums"),
    "manifest: environment a list": _set("environment", ["numpy", "2.0"]),
    'manifest: seconds "abc"': _set("seconds", "abc"),
    "manifest: seconds negative": _set("seconds", -3),
    "manifest: seconds NaN": _set("seconds", math.nan),
    "manifest: files a string": _set("files", "polynomial.csv"),
    "manifest: files holds a number": _manifest(lambda m: {**m, "files": [*m.get("files", []), 7]}),
    "manifest: files names ../": _manifest(
        lambda m: {**m, "files": [*m.get("files", []), "../elsewhere.csv"]}
    ),
    "manifest: a checksum changed": _a_checksum_changed,
    "manifest: another seed": _another_seed,
    "png: corrupt": _png(lambda data: b"\x89PNG\r\n\x1a\n" + b"\x00" * 64),
    "png: cut in half": _png(lambda data: data[: len(data) // 2]),
    "png: deleted": lambda folder, name: _delete(_first_png(folder, name).name[len(name) :])(folder, name),
    "png: corrupt, checksum re-signed": _corrupt_png_signed,
}


# -- the report's claim tables ------------------------------------------------------------------------

VERDICTS = ("held", "not held", "not measured")
SUMMARY = re.compile(r"(\d+) claims: (\d+) held, (\d+) not held, (\d+) not measured")


def claim_table(markdown: str) -> list[list[str]]:
    """The rows of a report.md's claim tables, ``[claim, measured, setting, verdict]``, each
    cell unescaped (the report writes ``|`` as ``\\|`` and ``\\`` as ``\\\\``)."""
    rows, inside = [], False
    for line in markdown.splitlines():
        if line.startswith("| claim | measured | setting | verdict |"):
            inside = True
        elif inside and line.startswith("|---"):
            continue
        elif inside and line.startswith("| "):
            cells = re.findall(r"\|((?:\\.|[^\\|])*)", line.strip())[:-1]  # the last: after the closing |
            rows.append([re.sub(r"\\(.)", r"\1", cell).strip() for cell in cells])
        else:
            inside = False
    return rows


def counts_add_up(markdown: str) -> bool:
    """Whether a report.md's summary line ("N claims: H held, X not held, U not measured")
    counts the verdicts of its claim tables, each one of :data:`VERDICTS`."""
    said = SUMMARY.search(markdown)
    verdicts = [row[-1] for row in claim_table(markdown)]
    return (
        said is not None
        and set(verdicts) <= set(VERDICTS)
        and tuple(map(int, said.groups())) == (len(verdicts), *(verdicts.count(v) for v in VERDICTS))
    )
