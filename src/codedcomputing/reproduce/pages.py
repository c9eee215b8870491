"""Sphinx pages of a reproduction (``coded reproduce --docs DIR``): ``DIR/NAME.rst`` for each
experiment of the run, and ``DIR/index.rst``, a table of every experiment page in ``DIR``.

An experiment's page says how it was run (the full grid or ``--quick``, the seed, the version
and the commit that ran it, "abc1234 (dirty)" when the package's files differed from that
commit, the seconds it took, when it finished), then its claims with the measured values
and verdicts, its headline table, and its figures, copied beside the page. Everything on it is
computed from the report's parts: the CSVs and manifests in the output folder.

Each page opens with a comment holding, as one line of JSON, what the index shows of it, and
the index is rebuilt from the pages in ``DIR``. So pages written by different runs (the full
grid for some experiments, ``--quick`` for others, from different output folders) stand side
by side, each saying how it was made, and the index lists exactly the pages there are.
"""

from __future__ import annotations

import json
from pathlib import Path

from .._version import __version__
from ..experiments import EXPERIMENTS
from ..experiments.driver import _cell
from ..experiments.records import figure_text, output_dir, read_csv
from .claims import PAPERS
from .report import Document, to_rst

__all__ = ["RECORD", "SHOWS", "copy_figure", "figure_caption", "page_records", "write_pages"]

# The comment that opens a page this module wrote, followed by the page's record (JSON).
RECORD = ".. coded reproduce page: "
VERDICTS = ("held", "not held", "not measured")

# What each figure shows, by file name; the band is read from the figure itself
# (the caption the experiment wrote into it: :func:`~codedcomputing.experiments.records.figure_text`).
SHOWS = {
    "stragglers": "Fig. 2: MSE and relative accuracy against the number of stragglers S, LeNet-5 and the ViT",
    "polynomial": "Fig. 3: MSE of GCC, BACC and LCC against S on a random quadratic, around LCC's threshold",
    "rates": "Fig. 4: MSE against N (log-log) with fitted slopes and the theory's rates, dashed",
    "latency_cdf": "end-to-end latency CDFs per backend and delay model, one line per scheme and S",
    "latency_percentiles": "p50 / p95 / p99 latency per scheme on each backend (log axis)",
    "manifold_mse": "MSE against S for ManifoldGCC, GCC and BACC, a panel per task, K and pattern",
    "manifold_accuracy": "relative accuracy against S on the MNIST networks",
    "adversarial": "robust GCC (Tukey) MSE against N for each attack and a, with (6/5)(a - 1) dashed",
    "adversarial_schemes": "every decoder's MSE against N at a = 0.5, for each attack",
    "gradient-coding": "training loss against wall-clock and steps; time to target per scheme, s, "
    "delay, persistent slowness and backend",
    "frontier": "per-query p99.9 latency against accuracy at equal resources, a panel per straggler "
    "regime and resource level, each scheme over its knob",
    "serving": "p99.9, p50 and accuracy of served queries against offered load, every scheme on the same "
    "replicas, a row of panels per straggler regime (simulated clock)",
    "serving_backends": "p50 and p99 on live replicas (threads, Ray) against the simulated clock on the "
    "same draws, per scheme and load",
}


def figure_caption(path: Path) -> str:
    """What the figure at ``path`` shows (:data:`SHOWS`, else the title it holds) and its band,
    as the report and the pages caption it; raises what PIL raises on a PNG it cannot read."""
    text = figure_text(path)
    shows = SHOWS.get(path.stem) or text["Title"] or path.stem
    band = text["Description"]
    return f"{shows}." + (f" {band[0].upper()}{band[1:]}." if band else "")


def copy_figure(source: Path, target: Path) -> None:
    """Copy the PNG ``source`` to ``target`` as a 256-colour palette image on white (about a
    third of the bytes of a matplotlib figure, for pages kept in a repository), keeping the
    title, the description and the resolution it holds."""
    from PIL import Image, PngImagePlugin

    with Image.open(source) as image:
        image.load()
        text = dict(getattr(image, "text", {}) or {})
        dpi = image.info.get("dpi")
        rgba = image.convert("RGBA")
    flat = Image.new("RGBA", rgba.size, "white")
    flat.alpha_composite(rgba)
    palette = flat.convert("RGB").quantize(
        colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
    )
    info = PngImagePlugin.PngInfo()
    for key, value in text.items():
        info.add_text(key, str(value))
    options = {"dpi": dpi} if dpi else {}
    palette.save(target, "PNG", optimize=True, pnginfo=info, **options)


def write_pages(parts, out_dir, docs_dir, *, quick: bool, seed: int) -> list[Path]:
    """Write a page per part (an experiment of a reproduction into ``out_dir``, with ``quick``
    and ``seed``) into ``docs_dir``, copy its figures beside it, and rewrite ``index.rst``
    from every page there; returns the paths written, the index last. A page's figures that
    its new run no longer writes are removed."""
    out_dir = Path(out_dir)
    docs_dir = output_dir(docs_dir)
    written = []
    for part in parts:
        written += _experiment_page(part, out_dir, docs_dir, quick=quick, seed=seed)
    written.append(_index(docs_dir))
    return written


def page_records(docs_dir) -> dict[str, dict]:
    """``{page name: record}`` of the pages in ``docs_dir`` other than the index (a page this
    module did not write, or whose record cannot be read, has an empty record)."""
    records = {}
    for page in sorted(Path(docs_dir).glob("*.rst")):
        if page.stem != "index":
            records[page.stem] = _record_of(page)
    return records


def _record_of(page: Path) -> dict:
    try:
        with page.open(encoding="utf-8") as file:
            first = file.readline()
    except (OSError, UnicodeDecodeError):
        return {}
    if not first.startswith(RECORD):
        return {}
    try:
        record = json.loads(first[len(RECORD) :])
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def _claims_summary(record: dict) -> str:
    counts = [(record.get(verdict, 0), verdict) for verdict in VERDICTS]
    shown = [f"{count} {verdict}" for count, verdict in counts if count]
    return ", ".join(shown) or "none"


def _experiment_page(part, out_dir: Path, docs_dir: Path, *, quick: bool, seed: int) -> list[Path]:
    module = EXPERIMENTS[part.name]
    page = docs_dir / f"{part.name}.rst"
    before = _record_of(page) if page.exists() else {}
    figures = [file for file in part.files if file.endswith(".png")]
    grid = "quick" if quick else "full"
    commit = part.commit or "not recorded"  # a reused part's: the commit of the run that wrote it
    version = part.environment.get("codedcomputing") or __version__
    record = {
        "experiment": part.name,
        "status": part.status,
        "grid": grid,
        "seed": seed,
        "version": version,
        "commit": commit,
        "seconds": round(part.seconds, 1),
        "finished": part.finished,
        **{verdict: sum(claim.verdict == verdict for claim in part.claims) for verdict in VERDICTS},
    }
    doc = Document(part.name)
    doc.paragraph(f"What it runs: {module.SUMMARY}.")
    papers = [paper.title for paper in PAPERS.values() if part.name in paper.experiments]
    doc.paragraph(
        f"It tests the claims of: {'; '.join(papers)}. Every number and figure below was computed by "
        f"`coded reproduce` from {part.name}.csv, the rows the experiment wrote."
    )
    doc.heading(1, "How it was run")
    rerun = f"coded reproduce --out DIR --only {part.name}{' --quick' if quick else ''} --docs docs/results"
    doc.table(
        ("", ""),
        [
            (
                "grid",
                "quick (--quick: smaller grids and fewer trials than the papers)" if quick else "full",
            ),
            ("seed", str(seed)),
            ("codedcomputing", version),
            ("commit", commit),
            *[
                (key, part.environment[key])
                for key in ("python", "platform", "CPUs")
                if key in part.environment
            ],
            ("time", ("failed after " if part.status == "failed" else "") + _duration(part.seconds)),
            ("finished", part.finished or "-"),
            ("to regenerate", f"`{rerun}`"),
        ],
    )
    doc.heading(1, "Claims")
    if part.claims:
        doc.table(
            ("claim", "measured", "setting", "verdict"),
            [(c.claim, c.measured, c.setting, c.verdict) for c in part.claims],
        )
    else:
        doc.paragraph("The experiment has no claims in this configuration.")
    if part.status == "failed":
        doc.heading(1, "Error")
        doc.paragraph("The experiment failed, so its claims are not measured:")
        doc.code(part.error)
    else:
        _headline(doc, module, out_dir / f"{part.name}.csv")
    copied = []
    if figures:
        doc.heading(1, "Figures")
        for file in figures:
            source = out_dir / file
            try:
                caption = figure_caption(source)
            except Exception as err:  # PIL raises several kinds on a damaged PNG
                doc.paragraph(
                    f"{file} is not shown: it cannot be read as a PNG ({type(err).__name__}: {err})."
                )
                continue
            copy_figure(source, docs_dir / file)
            copied.append(docs_dir / file)
            doc.figure(docs_dir / file, caption)
    record["figures"] = [path.name for path in copied]  # what the next run of this page may remove
    if part.files:
        doc.heading(1, "Files")
        doc.paragraph(
            f"The run wrote {', '.join(part.files)} in its output folder, and {part.name}.run.json, "
            "its manifest (configuration, seed, versions, each file's sha256)."
        )
    for stale in before.get("figures", []):
        if isinstance(stale, str) and Path(stale).name == stale and stale not in record["figures"]:
            (docs_dir / stale).unlink(missing_ok=True)
    page.write_text(RECORD + json.dumps(record) + "\n\n" + to_rst(doc, docs_dir), encoding="utf-8")
    return [page, *copied]


def _headline(doc: Document, module, csv_path: Path) -> None:
    """The experiment's headline table, computed from its CSV."""
    try:
        headline = module.headline(read_csv(csv_path))
    except Exception as err:  # rows unlike any a run writes: said in one line
        doc.paragraph(
            f"Its headline table cannot be computed from {csv_path.name}: {type(err).__name__}: {err}."
        )
        return
    doc.heading(1, "Headline")
    doc.paragraph(f"{headline.title}:")
    doc.table(headline.columns, [[_cell(value) for value in row] for row in headline.rows])
    if headline.note:
        doc.paragraph(headline.note)


def _index(docs_dir: Path) -> Path:
    records = page_records(docs_dir)
    order = {name: i for i, name in enumerate(EXPERIMENTS)}
    names = sorted(records, key=lambda name: (order.get(name, len(order)), name))
    ours = [name for name in names if records[name]]
    doc = Document("Results")
    doc.paragraph(
        "Every number and figure in these pages was measured by the code: `coded reproduce --docs` "
        "wrote them from its own report, each from the CSV its experiment wrote, and each page says how "
        "its experiment was run. An experiment run on the quick grid (`--quick`) used smaller grids and "
        "fewer trials than the papers. The guide's page on reproducing the papers says how to regenerate "
        "them."
    )
    total = {verdict: sum(records[name].get(verdict, 0) for name in ours) for verdict in VERDICTS}
    grids = sorted({records[name].get("grid", "?") for name in ours})
    doc.paragraph(
        f"{len(ours)} experiment(s), on the {' and '.join(grids)} grid{'s' if len(grids) > 1 else ''}: "
        f"{sum(total.values())} claims, {total['held']} held, {total['not held']} not held, "
        f"{total['not measured']} not measured."
        if ours
        else "No experiment has a page yet."
    )
    rows = []
    for name in ours:
        record = records[name]
        seconds = record.get("seconds")
        rows.append(
            (
                name,
                _claims_summary(record) + (" (failed)" if record.get("status") == "failed" else ""),
                record.get("grid", "?"),
                record.get("seed", "?"),
                record.get("version", "?"),
                record.get("commit", "not recorded"),
                _duration(seconds) if isinstance(seconds, (int, float)) else "?",
                record.get("finished") or "-",
            )
        )
    if rows:
        doc.table(("experiment", "claims", "grid", "seed", "version", "commit", "time", "finished"), rows)
    missing = [name for name in EXPERIMENTS if name not in records]
    if missing:
        doc.paragraph(
            f"No page yet: {', '.join(missing)} (`coded reproduce --only {','.join(missing)} --docs DIR` "
            "writes them)."
        )
    text = to_rst(doc, docs_dir)
    if names:
        text += "\n.. toctree::\n   :maxdepth: 1\n\n" + "".join(f"   {name}\n" for name in names)
    index = docs_dir / "index.rst"
    index.write_text(text, encoding="utf-8")
    return index
