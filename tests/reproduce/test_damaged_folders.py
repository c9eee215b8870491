"""`coded reproduce` on a damaged ``--out`` folder: a finished experiment whose files or
manifest were damaged afterwards (each damage of :data:`damages.FOLDER_DAMAGES`) is run
again, with one line naming the file and what is wrong; its claims are never read from a CSV
that is not the one its run wrote. Every claim of the experiments asked for is in the report,
with a verdict, and the counts add up.

A finished experiment is also run again when the library's code or the data it reads changed
since (its manifest's code and data hashes), and reused when only the commit or the version
did; its page names the commit that ran it.

The folder is made by a real run of a fast stand-in for the polynomial experiment (its
``run`` returns rows built here), so each case takes about a second.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from damages import FOLDER_DAMAGES, claim_table, counts_add_up

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
    from codedcomputing.reproduce import provenance

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
    # the library's code hash taken once: a file of it edited while the tests run (in another
    # window) would otherwise rerun the stand-in where a test expects it reused
    code = provenance.code_hash()
    monkeypatch.setattr(provenance, "code_hash", lambda: code)
    monkeypatch.setattr(module, "derived", lambda rows: {"polynomial_lcc": rows[:4]}, raising=False)
    return calls


def reproduce_here(folder: Path):
    from rich.console import Console

    from codedcomputing.reproduce import reproduce

    console = Console(record=True, width=1000)
    done = reproduce(folder, quick=True, only="polynomial", progress=False, console=console)
    return done, console.export_text()


def assert_every_claim_has_a_verdict(done, expected: int) -> None:
    """The report's claim table holds ``expected`` claims, each with a verdict, and its summary
    line counts them."""
    markdown = done.markdown.read_text()
    assert len(claim_table(markdown)) == expected and counts_add_up(markdown), markdown


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


# -- code, data and commit: what a manifest records of the source a run had ------------------------


def edit_manifest(folder: Path, change) -> None:
    path = folder / "polynomial.run.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def reasons(said: str) -> list[str]:
    return [line for line in said.splitlines() if "running it again" in line]


def test_the_manifest_records_the_commit_and_whether_the_package_was_dirty(finished):
    import codedcomputing

    package = Path(codedcomputing.__file__).parent
    head = subprocess.run(["git", "-C", str(package), "rev-parse", "HEAD"], capture_output=True, text=True)
    tracked = subprocess.run(
        ["git", "-C", str(package), "ls-files", "__init__.py"], capture_output=True, text=True
    )
    if head.returncode != 0 or not tracked.stdout.strip():
        pytest.skip("the library is not imported from a git checkout")
    manifest = json.loads((finished / "polynomial.run.json").read_text())
    assert re.fullmatch(r"[0-9a-f]{40}", manifest["commit"]) and manifest["commit"] == head.stdout.strip()
    assert isinstance(manifest["dirty"], bool)
    assert re.fullmatch(r"[0-9a-f]{64}", manifest["code_hash"])
    assert re.fullmatch(r"[0-9a-f]{64}", manifest["data_hash"]) and manifest["data"] == {}  # reads no data
    assert "version" not in manifest["fingerprint"] and manifest["environment"]["codedcomputing"]


def test_a_run_from_another_commit_and_version_with_the_same_hashes_is_reused_and_its_page_names_it(
    finished, runs
):
    from codedcomputing.reproduce import reproduce

    def another_commit(manifest):
        manifest.update(commit="fedcba9876543210fedcba9876543210fedcba98", dirty=True)
        manifest["environment"]["codedcomputing"] = "0.0.1"

    edit_manifest(finished, another_commit)
    docs = finished / "docs"
    done = reproduce(finished, quick=True, only="polynomial", progress=False, docs=docs)
    assert [part.status for part in done.parts] == ["reused"] and runs == [0]
    assert done.parts[0].commit == "fedcba9 (dirty)"
    page = (docs / "polynomial.rst").read_text()
    assert (
        '"commit": "fedcba9 (dirty)"' in page.splitlines()[0] and '"version": "0.0.1"' in page.splitlines()[0]
    )
    assert "fedcba9 (dirty)" in (docs / "index.rst").read_text()
    assert "ran with codedcomputing 0.0.1" in done.markdown.read_text()  # the report names the version


def test_a_change_to_the_code_reruns_the_experiment_saying_since_which_commit(finished, runs, monkeypatch):
    from codedcomputing.reproduce import provenance

    edit_manifest(finished, lambda manifest: manifest.update(commit="abc1234" + "0" * 33, dirty=False))
    monkeypatch.setattr(provenance, "code_hash", lambda: "0" * 64)
    done, said = reproduce_here(finished)
    assert [part.status for part in done.parts] == ["ran"] and runs == [0, 0]
    assert reasons(said) == ["reproduce: polynomial: code changed since abc1234; running it again"]
    assert "polynomial (code changed since abc1234)" in done.markdown.read_text()
    again, said = reproduce_here(finished)
    assert [part.status for part in again.parts] == ["reused"] and not reasons(said)


def test_a_change_to_the_data_reruns_the_experiment_naming_what_changed(tmp_path, runs, monkeypatch):
    from codedcomputing.reproduce import provenance, run

    digests = {"digits": "1" * 64}
    monkeypatch.setitem(run.DATASETS_USED, "polynomial", ("digits",))
    monkeypatch.setattr(provenance, "dataset_digest", lambda name: digests[name])
    reproduce_here(tmp_path)
    manifest = json.loads((tmp_path / "polynomial.run.json").read_text())
    assert manifest["data"] == {"datasets/digits": "1" * 64}
    assert [part.status for part in reproduce_here(tmp_path)[0].parts] == ["reused"]
    digests["digits"] = "unavailable"
    done, said = reproduce_here(tmp_path)
    assert [part.status for part in done.parts] == ["ran"] and runs == [0, 0]
    assert len(reasons(said)) == 1 and "data changed since " in said and "(datasets/digits)" in said


def test_a_manifest_without_hashes_is_of_an_older_version_and_reruns(finished, runs):
    def older(manifest):
        del manifest["code_hash"], manifest["data_hash"]
        manifest["fingerprint"]["version"] = "0.0.1"

    edit_manifest(finished, older)
    done, said = reproduce_here(finished)
    assert [part.status for part in done.parts] == ["ran"] and runs == [0, 0]
    assert reasons(said) == [
        "reproduce: polynomial: polynomial.run.json records no code and data hashes "
        "(it was written by an older version); running it again"
    ]
