"""`coded reproduce --docs`: the reStructuredText renderer (tables, figures, code, escaping, read
back by docutils), the pages written from a reproduction's parts (a page per experiment, an
index rebuilt from the pages there, figures copied small, pages of a full and a quick run side
by side), and that Sphinx builds them with warnings as errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from docutils import nodes
from docutils.core import publish_doctree
from PIL import Image, PngImagePlugin
from typer.testing import CliRunner

from codedcomputing.cli import app
from codedcomputing.experiments.records import figure_text
from codedcomputing.reproduce.claims import Claim
from codedcomputing.reproduce.pages import RECORD, page_records, write_pages
from codedcomputing.reproduce.report import Document, to_rst
from codedcomputing.reproduce.run import Part
from damages import claim_table

runner = CliRunner()
WIDE = {"COLUMNS": "200"}

# Text that reStructuredText would read as markup, a list, an enumeration or a reference.
TRICKY = [
    "- not a list",
    "1. not an enumeration",
    "A. Smith is not one either",
    "#. nor this",
    "(a) nor this",
    "*not emphasis* and **not strong**",
    "num_workers_ is no reference, nor [1]_ nor word_ nor a_b__",
    "|not a substitution| and a\\backslash",
    "ends with a colon pair::",
    ">>> not a doctest",
    ".. not a comment",
    ":not: a field",
    "",
]


def doctree(text: str):
    """``text`` parsed by docutils, any warning an error; the title stays a section's, as in Sphinx."""
    return publish_doctree(
        text,
        settings_overrides={
            "halt_level": 2,
            "report_level": 2,
            "warning_stream": False,
            "doctitle_xform": False,
        },
    )


def png(path, title="a title", description="bands: 95% bootstrap interval of the mean", size=(600, 400)):
    """A figure as the experiments save one: RGBA, its title and band in text chunks."""
    image = Image.new("RGBA", size, "white")
    for x in range(size[0]):  # a few colours, as lines on a plot
        image.putpixel((x, (x * 7) % size[1]), (31, 119, 180, 255))
        image.putpixel((x, (x * 3) % size[1]), (214, 39, 40, 255))
    info = PngImagePlugin.PngInfo()
    info.add_text("Title", title)
    info.add_text("Description", description)
    image.save(path, pnginfo=info)
    return path


def test_rst_paragraphs_show_tricky_text_as_written():
    doc = Document("A title with *stars* and num_workers")
    for text in TRICKY:
        doc.paragraph(text)
    tree = doctree(to_rst(doc, base=None))
    assert tree.next_node(nodes.title).astext() == "A title with *stars* and num_workers"
    paragraphs = [p.astext() for p in tree.findall(nodes.paragraph)]
    assert paragraphs == [text for text in TRICKY if text]  # an empty paragraph is left out
    for kind in (nodes.bullet_list, nodes.enumerated_list, nodes.reference, nodes.emphasis, nodes.strong):
        assert not list(tree.findall(kind)), kind.__name__


def test_rst_code_spans_become_inline_literals_wherever_they_stand():
    doc = Document("t")
    doc.paragraph("run `coded reproduce --quick`, then x`y`z and `a``b` and ` spaced `")
    tree = doctree(to_rst(doc, base=None))
    assert [n.astext() for n in tree.findall(nodes.literal)] == ["coded reproduce --quick", "y", "a", "b"]
    assert tree.next_node(nodes.paragraph).astext() == (
        "run coded reproduce --quick, then xyz and ab and ` spaced `"
    )


def test_rst_tables_lists_code_and_headings(tmp_path):
    doc = Document("report")
    doc.heading(1, "Claims | verdicts")
    doc.table(("claim", "measured", "verdict"), [("- a claim", "1.5e-3", "held"), ("b_c", "", "not held")])
    doc.heading(2, "how")
    doc.table(("", ""), [("seed", "0"), ("grid", "quick")])  # no header: the rows alone
    doc.items(["1. first", "*second*"])
    doc.code("Traceback (most recent call last):\n  x = *y\n\nValueError: bad")
    doc.code("")
    doc.figure(tmp_path / "figs" / "a.png", "What it shows. Bands: 95% interval of *the mean*.")
    tree = doctree(to_rst(doc, base=tmp_path))
    sections = [s.next_node(nodes.title).astext() for s in tree.findall(nodes.section)]
    assert sections == ["report", "Claims | verdicts", "how"]
    tables = list(tree.findall(nodes.table))
    assert len(tables) == 2
    first = [[entry.astext() for entry in row.findall(nodes.entry)] for row in tables[0].findall(nodes.row)]
    assert first == [
        ["claim", "measured", "verdict"],
        ["- a claim", "1.5e-3", "held"],
        ["b_c", "", "not held"],
    ]
    assert not list(tables[1].findall(nodes.thead))
    assert [row.astext().split() for row in tables[1].findall(nodes.row)] == [
        ["seed", "0"],
        ["grid", "quick"],
    ]
    assert [item.astext() for item in tree.findall(nodes.list_item)] == ["1. first", "*second*"]
    code = list(tree.findall(nodes.literal_block))
    assert len(code) == 1 and code[0].astext().endswith("  x = *y\n\nValueError: bad")
    figure = tree.next_node(nodes.figure)
    assert figure.next_node(nodes.image)["uri"] == "figs/a.png"  # relative to the page's folder
    assert figure.next_node(nodes.caption).astext() == "What it shows. Bands: 95% interval of *the mean*."


def claim(experiment, held, text="GCC's MSE grows with S."):
    return Claim("gcc", experiment, text, "slope 2.9 (95% CI 2.7 to 3.1)", "K = 10, N = 40", held)


def part(name, out, figures=(), status="ran", claims=None, seconds=75.4):
    files = [f"{name}.csv", *figures]
    for figure in figures:
        png(out / figure, title=f"{figure} title")
    return Part(
        name,
        status,
        seconds,
        files if status != "failed" else [],
        claims if claims is not None else [claim(name, True), claim(name, False, "LCC_is_exact *below* |S|")],
        error="RuntimeError: the cache is unreadable" if status == "failed" else "",
        environment={"codedcomputing": "0.0.9"} if status != "failed" else {},
        finished="2026-01-02 03:04 UTC" if status != "failed" else "",
        commit="0123abc (dirty)",
    )


def test_pages_say_how_each_experiment_ran_and_the_index_lists_every_page(tmp_path):
    out, docs = tmp_path / "out", tmp_path / "docs" / "results"
    out.mkdir()
    polynomial = part("polynomial", out, figures=["polynomial.png"])
    written = write_pages([polynomial], out, docs, quick=False, seed=3)
    assert [p.name for p in written] == ["polynomial.rst", "polynomial.png", "index.rst"]
    # the figure is copied beside the page, as a palette image holding its title and band
    copied = docs / "polynomial.png"
    assert figure_text(copied) == figure_text(out / "polynomial.png")
    with Image.open(copied) as image:
        assert image.mode == "P" and image.size == (600, 400)
    page = (docs / "polynomial.rst").read_text()
    assert page.startswith(RECORD)
    tree = doctree(page)
    text = tree.astext()
    assert "full" in text and "2026-01-02 03:04 UTC" in text and "1 min 15 s" in text
    # the commit and version that ran it (a reused part's: its manifest's), not the library's now
    how = dict(
        [e.astext() for e in row.findall(nodes.entry)]
        for row in tree.next_node(nodes.table).findall(nodes.row)
    )
    assert how["commit"] == "0123abc (dirty)" and how["codedcomputing"] == "0.0.9"
    assert "coded reproduce --out DIR --only polynomial --docs docs/results" in text
    claims = [
        [e.astext() for e in row.findall(nodes.entry)]
        for row in list(tree.findall(nodes.table))[1].findall(nodes.row)
    ]
    assert claims[1:] == [
        [c.claim, c.measured, c.setting, c.verdict] for c in polynomial.claims
    ]  # the claims as measured, escaping and all
    assert "polynomial.csv" in text  # no CSV: the headline cannot be computed, and the page says so
    assert tree.next_node(nodes.image)["uri"] == "polynomial.png"

    # a quick run of another experiment, written later into the same folder: both pages listed
    rates = part("rates", out, figures=["rates.png"], claims=[claim("rates", None)], seconds=5)
    write_pages([rates], out, docs, quick=True, seed=0)
    records = page_records(docs)
    assert records["polynomial"]["grid"] == "full" and records["polynomial"]["seed"] == 3
    assert records["rates"]["grid"] == "quick" and records["rates"]["not measured"] == 1
    index = doctree((docs / "index.rst").read_text().split(".. toctree::")[0])  # a directive of Sphinx
    rows = [
        [e.astext() for e in row.findall(nodes.entry)]
        for row in index.next_node(nodes.table).findall(nodes.row)
    ]
    assert [row[:6] for row in rows] == [
        ["experiment", "claims", "grid", "seed", "version", "commit"],
        ["polynomial", "1 held, 1 not held", "full", "3", "0.0.9", "0123abc (dirty)"],
        ["rates", "1 not measured", "quick", "0", "0.0.9", "0123abc (dirty)"],
    ]
    assert "2 experiment(s), on the full and quick grids: 3 claims, 1 held, 1 not held, 1 not measured" in (
        index.astext()
    )
    assert "No page yet: stragglers, latency, manifold," in index.astext()
    assert re.search(
        r"\.\. toctree::\n   :maxdepth: 1\n\n   polynomial\n   rates\n", (docs / "index.rst").read_text()
    )

    # the experiment fails when run again: its page says so, and its old figure goes
    write_pages([part("polynomial", out, status="failed")], out, docs, quick=False, seed=3)
    assert not (docs / "polynomial.png").exists() and (docs / "rates.png").exists()
    failed = doctree((docs / "polynomial.rst").read_text()).astext()
    assert "RuntimeError: the cache is unreadable" in failed and "failed after 1 min 15 s" in failed
    assert page_records(docs)["polynomial"]["status"] == "failed"


def sphinx_build(source, out):
    """Build ``source`` with Sphinx, warnings as errors; its stderr when it fails."""
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-W",
        "--keep-going",
        "-q",
        "-b",
        "html",
        str(source),
        str(out),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stderr


def test_sphinx_builds_the_pages_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    site = tmp_path / "site"
    out = tmp_path / "out"
    out.mkdir()
    parts = [
        part("polynomial", out, figures=["polynomial.png"]),
        part("stragglers", out, figures=["stragglers.png"], status="failed"),
    ]
    write_pages(parts, out, site / "results", quick=True, seed=0)
    (site / "conf.py").write_text('project = "pages"\n')
    (site / "index.rst").write_text("Site\n====\n\n.. toctree::\n\n   results/index\n")
    code, stderr = sphinx_build(site, tmp_path / "html")
    assert code == 0, stderr
    html = (tmp_path / "html" / "results" / "polynomial.html").read_text()
    assert "LCC_is_exact *below* |S|" in html.replace("&lt;", "<").replace("&gt;", ">")
    assert (tmp_path / "html" / "_images" / "polynomial.png").is_file()


def test_a_bad_docs_folder_is_refused_before_any_work(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = runner.invoke(
        app,
        [
            "reproduce",
            "--quick",
            "--only",
            "polynomial",
            "--out",
            str(tmp_path / "out"),
            "--docs",
            str(blocker),
        ],
        env=WIDE,
    )
    assert result.exit_code == 2 and "--docs" in result.output
    assert not (tmp_path / "out" / "polynomial.csv").exists()


@pytest.mark.slow  # runs the quick polynomial experiment
def test_coded_reproduce_docs_writes_the_report_s_claims_and_reuses_the_run(tmp_path):
    out, docs = tmp_path / "out", tmp_path / "results"
    args = ["reproduce", "--quick", "--only", "polynomial", "--out", str(out), "--docs", str(docs)]
    result = runner.invoke(app, args, env=WIDE)
    assert result.exit_code == 0, result.output
    assert "wrote 2 page(s)" in result.output
    report = claim_table((out / "report.md").read_text())
    tree = doctree((docs / "polynomial.rst").read_text())
    tables = list(tree.findall(nodes.table))
    page = [[e.astext() for e in row.findall(nodes.entry)] for row in tables[1].findall(nodes.row)][1:]
    assert page == report  # the page's claims are the report's, figure for figure
    headline = [[e.astext() for e in row.findall(nodes.entry)] for row in tables[2].findall(nodes.row)]
    assert headline[0] == ["S", "lcc", "gcc", "gcc-natural", "bacc"] and len(headline) > 2
    record = json.loads((docs / "polynomial.rst").read_text().splitlines()[0][len(RECORD) :])
    assert record["status"] == "ran" and record["grid"] == "quick"
    (docs / "polynomial.rst").unlink()  # regenerated from the folder, the experiment reused
    again = runner.invoke(app, args, env=WIDE)
    assert again.exit_code == 0 and "reusing polynomial" in again.output
    assert page_records(docs)["polynomial"]["status"] == "reused"
    assert [
        [e.astext() for e in row.findall(nodes.entry)]
        for row in list(doctree((docs / "polynomial.rst").read_text()).findall(nodes.table))[1].findall(
            nodes.row
        )
    ][1:] == report
