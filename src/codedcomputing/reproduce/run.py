"""``coded reproduce``: run every experiment, check each paper's claims against the rows, and
write ``report.md`` and ``report.html`` (and, with ``docs``, Sphinx pages: :mod:`.pages`).

Each experiment is run by the experiment driver (its CSV, derived tables and figures go to
the output folder, as ``coded experiment`` writes them), then its CSV is read back and its
claims (:mod:`.claims`) are computed from what the file holds. Beside each CSV a manifest,
``NAME.run.json``, records the configuration, the seed, the library's version, the git commit
of the source and whether it was dirty, a hash of the code and one of the data
(:mod:`.provenance`), the files written (with each one's sha256, and a CSV's number of rows),
the seconds taken and when it finished; it is written only once the experiment has finished,
and a run that stopped half-way is redone.

An experiment is not run again (unless ``force``) when its manifest has the grid, seed and
configuration asked for, the code and data hashes of this run, and its files are still the
ones it wrote; the version and the commit may differ (a commit that changed no file of the
package, or none of the data, leaves the results as they were). Otherwise one line says why
(a manifest that cannot be read, a file that changed, "code changed since abc1234") and the
experiment runs again. An experiment that raises is reported (its error and the end of its
traceback) and the others go on; its claims are in the report as not measured.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import hashlib
import json
import math
import os
import platform
import sys
import time
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from .. import models
from .._progress import progress as show_progress
from .._version import __version__
from ..experiments import EXPERIMENTS, run_experiment
from ..experiments.records import output_dir, read_csv, read_table
from . import provenance
from .claims import PAPERS, Claim, claims_of
from .pages import figure_caption, write_pages
from .report import Document, to_html, to_markdown

__all__ = ["EXPECTED_S", "Part", "Reproduction", "experiment_names", "reproduce"]

# Seconds each experiment took on 2 cores with the models cached (quick, full), measured with
# `coded reproduce`; used only to say how long a run will take before it starts.
EXPECTED_S = {
    "stragglers": (5, 35),
    "polynomial": (2, 7),
    "rates": (5, 10),
    "latency": (15, 600),
    "manifold": (6, 220),
    "adversarial": (3, 50),
    "gradient-coding": (45, 420),
    "frontier": (15, 450),
    "serving": (30, 1850),
}

# The trained networks each experiment loads (shipped with the package for the default
# recipes; any other trained on first use, then cached), and the seconds training took here:
# added to the expected time when a model is neither shipped nor cached.
MODELS_USED = {
    "stragglers": ("lenet5", "vit"),
    "rates": ("lenet5",),
    "latency": ("lenet5",),
    "manifold": ("lenet5", "vit"),
    "adversarial": ("lenet5",),
    "frontier": ("lenet5",),
    "serving": ("lenet5",),
}
TRAIN_S = {"lenet5": 35, "vit": 210}
# The learned parity models' training seconds here per (network, k) (their sidecars'
# training_seconds, 2 shared cores); an experiment names the ones it uses with a
# ``parity_models_used(config)`` function.
PARITY_TRAIN_S = {("lenet5", 2): 170, ("lenet5", 4): 320, ("vit", 2): 670, ("vit", 4): 715}
# The datasets each experiment reads (besides the one its configuration names, if it has a
# ``dataset``, as gradient-coding's): their arrays go into its manifest's data hash, with the
# shipped weights of the experiments that load a model (MODELS_USED).
DATASETS_USED = {
    "stragglers": ("mnist",),
    "rates": ("mnist",),
    "latency": ("mnist",),
    "manifold": ("mnist",),
    "adversarial": ("mnist",),
    "frontier": ("mnist",),
    "serving": ("mnist",),
}


@dataclass
class Part:
    """One experiment of a reproduction: ``status`` "ran", "reused" or "failed"."""

    name: str
    status: str
    seconds: float
    files: list[str] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    error: str = ""
    environment: dict = field(default_factory=dict)  # what it ran with (a reused part: then)
    rerun_because: str = ""  # why its earlier run in the folder was not reused ("": none, or forced)
    finished: str = ""  # when it finished, "YYYY-MM-DD HH:MM UTC" ("": it failed)
    commit: str = ""  # the commit it ran at, "abc1234" or "abc1234 (dirty)" (provenance.commit_label)


@dataclass
class Reproduction:
    """What :func:`reproduce` did: its parts in order, the report's paths, the total seconds,
    and the Sphinx pages it wrote (none without ``docs``)."""

    parts: list[Part]
    markdown: Path
    html: Path
    seconds: float
    pages: list[Path] = field(default_factory=list)

    @property
    def claims(self) -> list[Claim]:
        return [claim for part in self.parts for claim in part.claims]


def experiment_names(only) -> list[str]:
    """The experiments ``only`` names (names, or a comma-separated string; None: all), each once;
    a ``ValueError`` naming ``only``, the unknown names and the nearest known ones otherwise."""
    if only is None:
        return list(EXPERIMENTS)
    names = [name.strip() for name in (only.split(",") if isinstance(only, str) else only) if name.strip()]
    unknown = [name for name in names if name not in EXPERIMENTS]
    if unknown or not names:
        near = {name: difflib.get_close_matches(name, list(EXPERIMENTS), n=1, cutoff=0.6) for name in unknown}
        hints = [f"{name!r} -> {match[0]!r}" for name, match in near.items() if match]
        hint = f"; did you mean {', '.join(hints)}?" if hints else ""
        raise ValueError(
            f"only: unknown experiment(s) {unknown or only!r}{hint} (known: {', '.join(EXPERIMENTS)})"
        )
    return list(dict.fromkeys(names))


def _untrained_parity_models(names, quick: bool) -> list[tuple[str, int]]:
    """``[(network, k), ...]``: the learned parity models the experiments ``names`` use (their
    module's ``parity_models_used(config)``) that are not cached yet, so will be trained."""
    from ..models import parity

    used = []
    for name in names:
        module = EXPERIMENTS[name]
        if hasattr(module, "parity_models_used"):
            used += module.parity_models_used(module.QUICK if quick else module.Config())
    missing = []
    for base, k in dict.fromkeys(used):
        weights = parity.parity_path(base, k)
        if not (weights.exists() and weights.with_suffix(".json").exists()):
            missing.append((base, k))
    return missing


def _fingerprint(name: str, quick: bool, seed: int) -> dict:
    """What a reused run must have been run with, besides the code and the data (the version is
    not in it: the code hash says whether the library changed)."""
    module = EXPERIMENTS[name]
    config = module.QUICK if quick else module.Config()
    return {
        "experiment": name,
        "quick": quick,
        "seed": seed,
        "config": json.loads(json.dumps(dataclasses.asdict(config), default=str)),
    }


class _Inputs:
    """The commit, the code hash (taken once, when the reproduction starts: the code it
    imports) and each experiment's data (datasets hashed once each) of one reproduction."""

    def __init__(self, quick: bool):
        self.quick = quick
        self.commit, self.dirty = provenance.source_commit()
        self.code_hash = provenance.code_hash()
        self._digests: dict[str, str] = {}

    def _digest(self, name: str) -> str:
        if name not in self._digests:
            self._digests[name] = provenance.dataset_digest(name)
        return self._digests[name]

    def data(self, name: str) -> dict:
        """``{what: sha256}`` of what experiment ``name`` reads (:func:`.provenance.data_inputs`)."""
        module = EXPERIMENTS[name]
        config = module.QUICK if self.quick else module.Config()
        used = [*DATASETS_USED.get(name, ()), *([config.dataset] if hasattr(config, "dataset") else [])]
        return provenance.data_inputs(used, weights=name in MODELS_USED, digest=self._digest)


def _manifest(out_dir: Path, name: str) -> Path:
    return out_dir / f"{name}.run.json"


def _checksum(path: Path) -> dict:
    """What a manifest records of a file it lists: its sha256, and a CSV's number of rows."""
    entry = {"sha256": _sha256(path)}
    if path.suffix == ".csv":
        entry["rows"] = _row_count(path)
    return entry


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _row_count(path: Path) -> int | None:
    """The records of a CSV after its header, whole or not (None: not UTF-8 CSV text)."""
    try:
        rows, ragged = read_table(path)
    except ValueError:
        return None
    return len(rows) + len(ragged)


def _json_kind(value) -> str:
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


def _manifest_problem(manifest) -> str:
    """What makes ``manifest`` (parsed JSON) not a manifest this module wrote, "" if nothing."""
    if not isinstance(manifest, dict):
        return f"holds {_json_kind(manifest)}, not a manifest (a JSON object)"
    missing = [key for key in ("fingerprint", "files", "seconds", "checksums") if key not in manifest]
    if missing:
        return f"lacks {', '.join(repr(key) for key in missing)}"
    if not isinstance(manifest["fingerprint"], dict):
        return f"has 'fingerprint' {_json_kind(manifest['fingerprint'])}, not an object"
    files = manifest["files"]
    if not isinstance(files, list) or not all(
        isinstance(file, str) and file and Path(file).name == file and file not in (".", "..")
        for file in files
    ):
        return f"has 'files' {json.dumps(files)[:60]}, not a list of file names in its folder"
    seconds = manifest["seconds"]
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not math.isfinite(seconds)
        or seconds < 0
    ):
        return f"has 'seconds' {json.dumps(seconds)[:40]}, not a number of seconds"
    if not isinstance(manifest.get("environment", {}), dict):
        return f"has 'environment' {_json_kind(manifest['environment'])}, not an object"
    checksums = manifest["checksums"]
    if not isinstance(checksums, dict):
        return f"has 'checksums' {_json_kind(checksums)}, not an object"
    unchecked = [file for file in files if not isinstance(checksums.get(file), dict)]
    if unchecked:
        return f"has no checksum of {', '.join(unchecked)}"
    return ""


def _file_problem(out_dir: Path, file: str, recorded: dict, manifest: str) -> str:
    """Why ``file`` is not the one its ``manifest`` (a file name) recorded, "" if it is."""
    path = out_dir / file
    if not path.is_file():
        return f"{file} is missing" if not path.exists() else f"{file} is not a file"
    if _sha256(path) == recorded.get("sha256"):
        return ""
    if "rows" in recorded:  # counted only now, to say what changed
        count = _row_count(path)
        if count != recorded["rows"]:
            rows = "no readable rows" if count is None else f"{count} rows"
            return f"{file} has {rows} where {manifest} recorded {recorded['rows']}"
    return f"{file} changed since {manifest} was written (its sha256 differs)"


def _since(manifest: dict) -> str:
    """The run a manifest records, as a reason names it: its commit, else when it finished."""
    if provenance.is_commit(manifest.get("commit")):
        return provenance.commit_label(manifest["commit"], manifest.get("dirty"))
    return f"its run of {manifest['finished']}" if isinstance(manifest.get("finished"), str) else "its run"


def _reusable(out_dir: Path, name: str, fingerprint: dict, inputs: _Inputs) -> tuple[dict | None, str]:
    """``(manifest, "")`` for a finished run of ``name`` with this fingerprint, this code hash
    and this data hash, whose files are all still the ones it wrote; else ``(None, why not)``,
    why not naming the file at fault or what changed ("" when there is no manifest: the
    experiment has not run here)."""
    path = _manifest(out_dir, name)
    if not path.exists():
        return None, ""
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        return None, f"{path.name} is not UTF-8 text"
    except ValueError as err:
        return None, f"{path.name} is not JSON ({err})"
    except OSError as err:
        return None, f"{path.name} cannot be read ({err.strerror or err})"
    problem = _manifest_problem(manifest)
    if problem:
        return None, f"{path.name} {problem}"
    if not all(isinstance(manifest.get(key), str) for key in ("code_hash", "data_hash")):
        return None, f"{path.name} records no code and data hashes (it was written by an older version)"
    if manifest["fingerprint"] != fingerprint:
        then = manifest["fingerprint"]
        changed = [
            key for key in dict.fromkeys([*fingerprint, *then]) if then.get(key) != fingerprint.get(key)
        ]
        return None, f"{path.name} is of a run with another {', '.join(changed)}"
    if manifest["code_hash"] != inputs.code_hash:
        return None, f"code changed since {_since(manifest)}"
    data = inputs.data(name)
    if manifest["data_hash"] != provenance.data_hash(data):
        then = manifest.get("data") if isinstance(manifest.get("data"), dict) else {}
        changed = [key for key in dict.fromkeys([*data, *then]) if then.get(key) != data.get(key)]
        which = f" ({', '.join(changed)})" if changed else ""
        return None, f"data changed since {_since(manifest)}{which}"
    for file in manifest["files"]:
        problem = _file_problem(out_dir, file, manifest["checksums"][file], path.name)
        if problem:
            return None, problem
    return manifest, ""


def _stamp(when: datetime.datetime) -> str:
    return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _finished(manifest: dict, path: Path) -> str:
    """When the run a manifest records finished: its ``finished``, else when it was written."""
    if isinstance(manifest.get("finished"), str):
        return manifest["finished"]
    return _stamp(datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.timezone.utc))


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def reproduce(
    out_dir,
    *,
    quick: bool = False,
    only=None,
    force: bool = False,
    seed: int = 0,
    progress: bool = True,
    console=None,
    docs=None,
) -> Reproduction:
    """Run the experiments (all, or ``only``: names or a comma-separated string) into
    ``out_dir``, reusing finished ones with the same configuration unless ``force``; check
    the papers' claims against their CSVs and write ``out_dir/report.md`` and
    ``out_dir/report.html``. A failing experiment is reported and does not stop the others.

    With ``docs`` (a folder, such as the repository's ``docs/results``), also write Sphinx
    pages there from the same parts: a page per experiment and an index of every experiment
    page in the folder (:func:`~codedcomputing.reproduce.pages.write_pages`). Both folders
    are checked before any work."""
    from rich.console import Console

    names = experiment_names(only)
    out_dir = output_dir(out_dir)
    if docs is not None:
        try:
            docs = output_dir(docs)
        except ValueError as err:
            raise ValueError(f"docs: {err}") from None
    console = console or Console(stderr=True)
    started = time.perf_counter()
    plans = {name: _fingerprint(name, quick, seed) for name in names}
    inputs = _Inputs(quick)
    checked = {name: (None, "") if force else _reusable(out_dir, name, plans[name], inputs) for name in names}
    reuse = {name: manifest for name, (manifest, _) in checked.items()}
    reasons = {name: why for name, (_, why) in checked.items() if why}
    to_run = [name for name in names if reuse[name] is None]
    expected = sum(EXPECTED_S.get(name, (60, 600))[0 if quick else 1] for name in to_run)
    untrained = sorted({m for name in to_run for m in MODELS_USED.get(name, ()) if not models.is_cached(m)})
    parities = _untrained_parity_models(to_run, quick)
    train_s = sum(TRAIN_S[m] for m in untrained) + sum(PARITY_TRAIN_S.get(p, 600) for p in parities)
    names_trained = [*untrained, *(f"{base}'s parity model (k = {k})" for base, k in parities)]
    training = (
        f", plus about {_duration(train_s)} to train {', '.join(names_trained)} (not cached yet)"
        if names_trained
        else ""
    )
    console.print(
        f"reproduce: {len(names)} experiment(s), {len(to_run)} to run "
        f"({', '.join(to_run) or 'none'}), expected about {_duration(expected)} on 2 cores{training}"
        + (f"; reusing {', '.join(n for n in names if reuse[n])}" if len(to_run) < len(names) else "")
    )
    for name, why in reasons.items():  # one line each: the file at fault and what is wrong with it
        console.print(f"reproduce: {name}: {why}; running it again", markup=False, highlight=False)
    parts = []
    # overall progress in expected seconds, so that its estimate of the time left weighs a
    # 15-minute experiment as such (a reused one counts 1)
    weight = {
        name: 1 if reuse[name] else max(1, EXPECTED_S.get(name, (60, 600))[0 if quick else 1])
        for name in names
    }
    total = sum(weight.values())
    with show_progress("reproduce: expected seconds of work done", total, enabled=progress) as advance:
        for name in names:
            part = _one(name, out_dir, plans[name], inputs, reuse[name], quick, seed, progress, console)
            part.rerun_because = reasons.get(name, "")
            parts.append(part)
            advance(weight[name])
    seconds = time.perf_counter() - started
    document = build_report(parts, out_dir, quick=quick, seed=seed, seconds=seconds)
    markdown = out_dir / "report.md"
    page = out_dir / "report.html"
    markdown.write_text(to_markdown(document, out_dir), encoding="utf-8")
    page.write_text(to_html(document), encoding="utf-8")
    pages = write_pages(parts, out_dir, docs, quick=quick, seed=seed) if docs is not None else []
    return Reproduction(parts, markdown, page, seconds, pages)


def _one(name, out_dir, fingerprint, inputs, manifest, quick, seed, progress, console) -> Part:
    """Run (or reuse) one experiment and read its claims from its CSV."""
    start = time.perf_counter()
    module = EXPERIMENTS[name]
    config = module.QUICK if quick else module.Config()
    commit = provenance.commit_label(inputs.commit, inputs.dirty)
    if manifest is not None:
        status, files, seconds = "reused", manifest["files"], float(manifest["seconds"])
        ran_with = dict(manifest.get("environment", {}))
        finished = _finished(manifest, _manifest(out_dir, name))
        commit = provenance.commit_label(manifest.get("commit"), manifest.get("dirty"))
    else:
        path = _manifest(out_dir, name)
        try:
            if path.is_dir():  # an empty folder where the manifest goes is removed; another is an error
                path.rmdir()
            path.unlink(missing_ok=True)  # a run that stops now leaves none
        except OSError as err:
            why = f"{path} cannot be replaced: {err.strerror or err}"
            return _failed(name, config, 0.0, why, why, commit=commit)
        try:
            paths = run_experiment(name, out_dir, quick=quick, seed=seed, progress=progress, console=console)
        except Exception as err:  # one experiment's failure is reported, the others go on
            tail = "".join(traceback.format_exception(err)[-3:])
            return _failed(
                name,
                config,
                time.perf_counter() - start,
                f"{type(err).__name__}: {err}\n{tail}",
                "the experiment failed",
                commit=commit,
            )
        seconds = time.perf_counter() - start
        files = [Path(p).name for p in paths]
        ran_with = dict(environment(seed, quick, commit=commit))
        finished = _stamp(datetime.datetime.now(datetime.timezone.utc))
        data = inputs.data(name)
        record = {
            "fingerprint": fingerprint,
            "commit": inputs.commit,
            "dirty": inputs.dirty,
            "code_hash": inputs.code_hash,
            "data_hash": provenance.data_hash(data),
            "data": data,
            "files": files,
            "checksums": {file: _checksum(out_dir / file) for file in files},
            "seconds": seconds,
            "finished": finished,
            "environment": ran_with,
        }
        written = path.with_name(path.name + ".partial")  # then renamed: never a manifest cut short
        written.write_text(json.dumps(record, indent=1), encoding="utf-8")
        os.replace(written, path)
        status = "ran"
    try:
        rows = read_csv(out_dir / f"{name}.csv")
    except (OSError, ValueError) as err:  # a claim that cannot be read is a failure of this part only
        why = f"reading {name}.csv: {type(err).__name__}: {err}"
        return _failed(name, config, seconds, why, why, files, commit=commit)
    claims = claims_of(name, rows, config)
    return Part(name, status, seconds, files, claims, environment=ran_with, finished=finished, commit=commit)


def _failed(name, config, seconds, error, why, files=(), *, commit="") -> Part:
    """A failed part: its claims are all there, not measured because of ``why``."""
    claims = [dataclasses.replace(claim, measured=why) for claim in claims_of(name, [], config)]
    return Part(name, "failed", seconds, list(files), claims, error=error, commit=commit)


def environment(seed: int, quick: bool, *, commit: str | None = None) -> list[tuple[str, str]]:
    """The machine and the packages a reproduction ran with, and the commit of the source
    (``commit``, as :func:`.provenance.commit_label` writes it; default: looked up now)."""
    rows = [
        ("codedcomputing", __version__),
        ("commit", commit or provenance.commit_label(*provenance.source_commit())),
        ("python", sys.version.split()[0]),
        ("platform", platform.platform()),
        ("CPUs", f"{len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()}"),
    ]
    for package in ("numpy", "scipy", "torch", "ray", "matplotlib", "threadpoolctl", "rich", "typer"):
        try:
            rows.append((package, metadata.version(package)))
        except metadata.PackageNotFoundError:
            rows.append((package, "not installed"))
    rows += [
        (
            "backends",
            "threads (the embedded cluster), the simulated clock, and Ray where an experiment uses it",
        ),
        ("seed", str(seed)),
        ("grid", "quick (--quick)" if quick else "full"),
    ]
    return rows


def build_report(parts: list[Part], out_dir: Path, *, quick: bool, seed: int, seconds: float) -> Document:
    """The report's blocks: the claim tables per paper, the figures, the experiments' status
    and times, failures, and the environment."""
    claims = [claim for part in parts for claim in part.claims]
    count = {v: sum(c.verdict == v for c in claims) for v in ("held", "not held", "not measured")}
    doc = Document(f"codedcomputing {__version__}: reproducing the papers' claims")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    failed = [part.name for part in parts if part.status == "failed"]
    doc.paragraph(
        f"Written {stamp} by `coded reproduce{' --quick' if quick else ''}` (seed {seed}) in "
        f"{_duration(seconds)}: {len(parts)} experiment(s), {len(claims)} claims: {count['held']} held, "
        f"{count['not held']} not held, {count['not measured']} not measured"
        + (f"; failed: {', '.join(failed)}." if failed else ".")
    )
    doc.paragraph(
        "Every measured figure and verdict below is computed from the experiment's CSV in this "
        "folder; the claims' sentences, and the thresholds they name, are fixed in "
        "codedcomputing.reproduce.claims."
        + (" A --quick run uses smaller grids and fewer trials than the papers." if quick else "")
    )
    ran = {part.name for part in parts}
    for paper in PAPERS.values():
        mine = [c for c in claims if c.paper == paper.key]
        tested = [name for name in paper.experiments if name in ran]
        if not tested:
            continue
        doc.heading(1, f"{paper.title} ({paper.authors})")
        if mine:
            doc.table(
                ("claim", "measured", "setting", "verdict"),
                [(c.claim, c.measured, c.setting, c.verdict) for c in mine],
            )
        failed_here = [name for name in tested if any(p.name == name and p.status == "failed" for p in parts)]
        doc.paragraph(
            f"Experiments: {', '.join(tested)}."
            + (f" Failed, so their claims are not measured: {', '.join(failed_here)}." if failed_here else "")
        )
    doc.heading(1, "Figures")
    for part in parts:
        figures = [file for file in part.files if file.endswith(".png")]
        if not figures:
            continue
        doc.heading(2, part.name)
        for file in figures:
            path = out_dir / file
            try:
                caption = figure_caption(path)
            except Exception as err:  # PIL raises several kinds on a damaged PNG
                doc.paragraph(
                    f"{file} is not shown: it cannot be read as a PNG ({type(err).__name__}: {err})."
                )
                continue
            doc.figure(path, caption)
    doc.heading(1, "Experiments")
    doc.table(
        ("experiment", "status", "time", "files"),
        [(p.name, p.status, _duration(p.seconds), ", ".join(p.files) or "-") for p in parts],
    )
    rerun = [f"{part.name} ({part.rerun_because})" for part in parts if part.rerun_because]
    if rerun:
        doc.paragraph("Run again, their earlier runs here not being reusable: " + "; ".join(rerun) + ".")
    for part in parts:
        if part.status == "failed":
            doc.heading(2, f"{part.name} failed")
            doc.code(part.error)
    doc.heading(1, "Environment")
    now = environment(seed, quick)
    doc.table(("", ""), now)
    changed = []
    for part in parts:
        if part.status != "reused":
            continue
        then = part.environment
        diffs = [  # the commit is on the experiment's page; packages and machine are what matter here
            f"{key} {then.get(key, 'unknown')}"
            for key, value in now
            if key != "commit" and then.get(key) != value
        ]
        if diffs:
            changed.append(f"{part.name} ran with {', '.join(diffs)}")
    if changed:
        doc.paragraph("Reused experiments that ran in another environment: " + "; ".join(changed) + ".")
    return doc
