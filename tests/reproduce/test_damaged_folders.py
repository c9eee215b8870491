"""`coded reproduce` on a damaged ``--out`` folder: a finished experiment whose files or
manifest were damaged afterwards is run again, with one line naming the file and what is
wrong; its claims are never read from a CSV that is not the one its run wrote. Every claim
of the experiments asked for is in the report, with a verdict, and the counts add up.

The folder is made by a real run of a fast stand-in for the polynomial experiment (its
``run`` returns rows built here), so each case takes about a second; :data:`FOLDER_DAMAGES`
is also what ``benchmarks/damaged_reports.py`` applies to the quick experiments' folders, so
this module imports nothing of the library at module level.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from pathlib import Path

import pytest


def _rewrite_rows(path: Path, change) -> None:
    table = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    header, rows = table[0], [row for row in table[1:] if row]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, *change(header, rows)])
    path.write_text(out.getvalue(), encoding="utf-8")


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
    text = path.read_text(encoding="utf-8").rstrip("\n")
    path.write_text(text[: len(text) - len(text.splitlines()[-1]) // 2] + "\n", encoding="utf-8")
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


# -- the tests: a stand-in polynomial experiment, run for real by `reproduce` ----------------------


def stand_in_rows(seed: int) -> list[dict]:
    """Rows of the polynomial experiment's shape: LCC exact up to S = 5 (N = 12, threshold 7)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [
        {
            "experiment": "polynomial",
            "function": "quadratic-4-2",
            "scheme": scheme,
            "num_inputs": 4,
            "num_workers": 12,
            "num_stragglers": s,
            "recovery_threshold": 7,
            "trial": trial,
            "seed": seed,
            "mse": (1e-14 if s <= 5 else 1e3) if scheme == "lcc" else float(rng.uniform(0.1, 1.0)),
        }
        for s in range(10)
        for trial in range(2)
        for scheme in ("lcc", "gcc", "gcc-natural", "bacc")
    ]


@pytest.fixture
def runs(monkeypatch):
    """The polynomial experiment replaced by a fast stand-in (rows above; a derived table; a
    small PNG carrying a title and caption, as figures do); returns the seeds it ran with."""
    from PIL import Image, PngImagePlugin

    from codedcomputing.experiments import EXPERIMENTS

    module = EXPERIMENTS["polynomial"]
    calls = []

    def run(config, seed, *, progress=True):
        calls.append(seed)
        return stand_in_rows(seed)

    def plot(rows, out_dir):
        info = PngImagePlugin.PngInfo()
        info.add_text("Title", "a stand-in")
        info.add_text("Description", "bands: none")
        path = Path(out_dir) / "polynomial.png"
        Image.new("RGB", (8, 8), "white").save(path, pnginfo=info)
        return [path]

    monkeypatch.setattr(module, "run", run)
    monkeypatch.setattr(module, "plot", plot)
    monkeypatch.setattr(module, "derived", lambda rows: {"polynomial_lcc": rows[:4]}, raising=False)
    return calls


def reproduce_here(folder: Path):
    from rich.console import Console

    from codedcomputing.reproduce import reproduce

    console = Console(record=True, width=1000)
    done = reproduce(folder, quick=True, only="polynomial", progress=False, console=console)
    return done, console.export_text()


def claim_table(markdown: str) -> list[list[str]]:
    rows, inside = [], False
    for line in markdown.splitlines():
        if line.startswith("| claim | measured | setting | verdict |"):
            inside = True
        elif inside and line.startswith("|---"):
            continue
        elif inside and line.startswith("| "):
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
        else:
            inside = False
    return rows


def assert_every_claim_has_a_verdict(done, expected: int) -> None:
    """The report's claim table holds ``expected`` claims, each with a verdict, and its summary
    line counts them."""
    import re

    markdown = done.markdown.read_text()
    table = claim_table(markdown)
    verdicts = [row[-1] for row in table]
    assert len(table) == expected and set(verdicts) <= {"held", "not held", "not measured"}
    said = re.search(r"(\d+) claims: (\d+) held, (\d+) not held, (\d+) not measured", markdown)
    counts = tuple(map(int, said.groups()))
    assert counts == (
        len(verdicts),
        verdicts.count("held"),
        verdicts.count("not held"),
        verdicts.count("not measured"),
    )


@pytest.fixture
def finished(tmp_path, runs):
    done, _ = reproduce_here(tmp_path)
    assert [part.status for part in done.parts] == ["ran"] and runs == [0]
    return tmp_path


def test_an_untouched_folder_is_reused_and_its_manifest_records_each_files_checksum(finished, runs):
    manifest = json.loads((finished / "polynomial.run.json").read_text())
    assert (
        set(manifest["checksums"])
        == set(manifest["files"])
        == {
            "polynomial.csv",
            "polynomial_lcc.csv",
            "polynomial.png",
        }
    )
    csv_file = finished / "polynomial.csv"
    assert manifest["checksums"]["polynomial.csv"] == {
        "sha256": hashlib.sha256(csv_file.read_bytes()).hexdigest(),
        "rows": len(stand_in_rows(0)),
    }
    done, said = reproduce_here(finished)
    assert [part.status for part in done.parts] == ["reused"] and runs == [0]
    assert "running it again" not in said
    assert_every_claim_has_a_verdict(done, 2)


@pytest.mark.parametrize(
    "damage", [name for name in FOLDER_DAMAGES if name != "png: corrupt, checksum re-signed"]
)
def test_a_damaged_file_or_manifest_is_named_in_one_line_and_its_experiment_runs_again(
    finished, runs, damage
):
    file = FOLDER_DAMAGES[damage](finished, "polynomial")
    done, said = reproduce_here(finished)
    assert [part.status for part in done.parts] == ["ran"] and runs == [0, 0], said
    lines = [line for line in said.splitlines() if "running it again" in line]
    assert len(lines) == 1 and lines[0].startswith("reproduce: polynomial: ") and file in lines[0], said
    assert file in done.markdown.read_text()  # the report says why it ran again
    assert_every_claim_has_a_verdict(done, 2)
    again, said = reproduce_here(finished)  # the run wrote a sound manifest: reused from now on
    assert [part.status for part in again.parts] == ["reused"] and "running it again" not in said


def test_a_figure_that_cannot_be_read_is_named_in_the_report_which_is_still_written(finished, runs):
    file = FOLDER_DAMAGES["png: corrupt, checksum re-signed"](finished, "polynomial")
    done, _ = reproduce_here(finished)
    assert [part.status for part in done.parts] == ["reused"]
    markdown = done.markdown.read_text()
    assert f"{file} is not shown: it cannot be read as a PNG" in markdown
    assert "<img" not in done.html.read_text()
    assert_every_claim_has_a_verdict(done, 2)


def test_a_failed_experiment_keeps_its_claims_as_not_measured(tmp_path, monkeypatch):
    from codedcomputing.experiments import EXPERIMENTS

    def broken(config, seed, *, progress=True):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(EXPERIMENTS["polynomial"], "run", broken)
    done, _ = reproduce_here(tmp_path)
    assert [part.status for part in done.parts] == ["failed"]
    assert [claim.measured for claim in done.claims] == ["the experiment failed"] * 2
    assert_every_claim_has_a_verdict(done, 2)
    assert "Failed, so their claims are not measured: polynomial." in done.markdown.read_text()
