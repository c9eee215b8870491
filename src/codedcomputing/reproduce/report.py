"""A report as a list of blocks, written as Markdown (figures linked beside it), as one
self-contained HTML file (figures embedded as base64 PNG, no external style or script) and as
reStructuredText for Sphinx (figures linked beside it).

The blocks are built once (:class:`Document`) and rendered per format, so the files say the
same thing; text is escaped for each format (``|`` in Markdown tables, ``<&>`` in HTML, inline
markup and list-like starts in reStructuredText). A span in single backticks is code: kept as
it is in Markdown and HTML, an inline literal in reStructuredText.
"""

from __future__ import annotations

import base64
import html
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Document", "to_html", "to_markdown", "to_rst"]


@dataclass
class Document:
    """Blocks in order: ``("heading", level, text)``, ``("paragraph", text)``, ``("list",
    items)``, ``("table", columns, rows)``, ``("figure", path, caption)``, ``("code", text)``."""

    title: str
    blocks: list[tuple] = field(default_factory=list)

    def heading(self, level: int, text: str) -> None:
        self.blocks.append(("heading", level, text))

    def paragraph(self, text: str) -> None:
        self.blocks.append(("paragraph", text))

    def items(self, items) -> None:
        self.blocks.append(("list", [str(item) for item in items]))

    def table(self, columns, rows) -> None:
        self.blocks.append(("table", [str(c) for c in columns], [[str(v) for v in row] for row in rows]))

    def figure(self, path: Path, caption: str) -> None:
        self.blocks.append(("figure", Path(path), caption))

    def code(self, text: str) -> None:
        self.blocks.append(("code", text))


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def to_markdown(document: Document, base: Path) -> str:
    """``document`` as Markdown; figures are linked relative to ``base`` (the report's folder)."""
    lines = [f"# {document.title}", ""]
    for block in document.blocks:
        kind = block[0]
        if kind == "heading":
            lines += [f"{'#' * (block[1] + 1)} {block[2]}", ""]
        elif kind == "paragraph":
            lines += [block[1], ""]
        elif kind == "list":
            lines += [f"- {item}" for item in block[1]] + [""]
        elif kind == "table":
            columns, rows = block[1], block[2]
            lines.append("| " + " | ".join(_md_cell(c) for c in columns) + " |")
            lines.append("|" + "---|" * len(columns))
            lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in rows]
            lines.append("")
        elif kind == "figure":
            path, caption = block[1], block[2]
            link = Path(os.path.relpath(path, base)).as_posix()
            lines += [f"![{_md_cell(caption)}]({link})", "", f"*{caption}*", ""]
        elif kind == "code":
            lines += ["```", block[1].rstrip("\n"), "```", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem;
       line-height: 1.45; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.2rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.held { color: #156b1f; font-weight: 600; }
td.not-held { color: #a3181b; font-weight: 600; }
td.not-measured { color: #777; }
figure { margin: 1rem 0 2rem; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.85rem; color: #444; }
pre { background: #f6f6f6; padding: 0.6rem; overflow-x: auto; font-size: 0.8rem; }
"""

_VERDICT_CLASS = {"held": "held", "not held": "not-held", "not measured": "not-measured"}


def to_html(document: Document) -> str:
    """``document`` as one self-contained HTML page: figures embedded, a small inline style."""
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(document.title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{esc(document.title)}</h1>",
    ]
    for block in document.blocks:
        kind = block[0]
        if kind == "heading":
            level = min(block[1] + 1, 6)
            parts.append(f"<h{level}>{esc(block[2])}</h{level}>")
        elif kind == "paragraph":
            parts.append(f"<p>{esc(block[1])}</p>")
        elif kind == "list":
            parts.append("<ul>" + "".join(f"<li>{esc(item)}</li>" for item in block[1]) + "</ul>")
        elif kind == "table":
            columns, rows = block[1], block[2]
            head = "".join(f"<th>{esc(c)}</th>" for c in columns)
            body = []
            for row in rows:
                cells = []
                for value in row:
                    css = _VERDICT_CLASS.get(value)
                    cells.append(f'<td class="{css}">{esc(value)}</td>' if css else f"<td>{esc(value)}</td>")
                body.append("<tr>" + "".join(cells) + "</tr>")
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
        elif kind == "figure":
            path, caption = block[1], block[2]
            data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
            parts.append(
                f'<figure><img alt="{esc(caption)}" src="data:image/png;base64,{data}">'
                f"<figcaption>{esc(caption)}</figcaption></figure>"
            )
        elif kind == "code":
            parts.append(f"<pre>{esc(block[1])}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# Section underlines of reStructuredText, by level: the title, then the Document's levels 1, 2, 3, ...
_RST_UNDERLINE = "=-~^\"'"
# What may stand right before an inline literal's opening backticks, and right after its closing ones.
_RST_BEFORE = set(" -:/'\"<([{")
_RST_AFTER = set(" -.,:;!?/'\")]}>")
# A text that would start a list, an enumeration, a field, a doctest, a comment or a quote.
_RST_BLOCK_START = re.compile(r"[-*+#|>.:(\[\\]|\w+[.)](\s|$)")


def _rst_escape(text: str) -> str:
    """``text`` with reStructuredText's inline markup characters escaped."""
    return re.sub(r"([\\*`|_])", r"\\\1", text).replace("::", ":\\:")


def _rst_text(text: str) -> str:
    """One line of reStructuredText showing ``text`` as written, its single-backtick spans
    as inline literals; safe to open a paragraph, a list item or a table cell."""
    text = " ".join(text.split("\n"))
    pieces = re.split(r"`([^`]+)`", text)  # odd pieces: the spans in backticks
    out = []
    for i, piece in enumerate(pieces):
        if i % 2 == 0:
            out.append(_rst_escape(piece))
        elif piece != piece.strip():  # an inline literal cannot start or end with a space
            out.append(_rst_escape(f"`{piece}`"))
        else:
            before = pieces[i - 1][-1:] or ("`" if i > 1 else " ")  # "`": right after another span
            after = pieces[i + 1][:1] or ("`" if i + 2 < len(pieces) else " ")
            out.append(
                ("" if before in _RST_BEFORE else "\\ ")
                + f"``{piece}``"
                + ("" if after in _RST_AFTER else "\\ ")
            )
    line = "".join(out).strip()
    if pieces[0].strip() and _RST_BLOCK_START.match(line) and not line.startswith("\\"):
        line = "\\" + line  # an escaped first character opens a plain paragraph
    return line


def to_rst(document: Document, base: Path) -> str:
    """``document`` as a reStructuredText page for Sphinx; figures are linked relative to
    ``base`` (the page's folder), tables are list-tables, code is a literal block."""
    title = _rst_text(document.title)
    lines = [title, _RST_UNDERLINE[0] * len(title), ""]
    for block in document.blocks:
        kind = block[0]
        if kind == "heading":
            text = _rst_text(block[2])
            mark = _RST_UNDERLINE[min(block[1], len(_RST_UNDERLINE) - 1)]
            lines += [text, mark * len(text), ""]
        elif kind == "paragraph":
            text = _rst_text(block[1])
            lines += [text, ""] if text else []
        elif kind == "list":
            lines += [f"- {_rst_text(item)}".rstrip() for item in block[1]] + [""]
        elif kind == "table":
            columns, rows = block[1], block[2]
            if not columns:
                continue
            header = 1 if any(column.strip() for column in columns) else 0  # else rows alone
            shown = [columns, *rows][1 - header :]
            if not shown:
                continue
            lines += [".. list-table::", f"   :header-rows: {header}", ""]
            for row in shown:
                cells = [_rst_text(value) for value in row]
                lines += [f"   * - {cells[0]}".rstrip()] + [f"     - {cell}".rstrip() for cell in cells[1:]]
            lines.append("")
        elif kind == "figure":
            path, caption = block[1], block[2]
            link = Path(os.path.relpath(path, base)).as_posix()
            lines.append(f".. figure:: {link}")
            if caption.strip():  # the alt text is read as it is; the caption is a paragraph
                lines += [f"   :alt: {' '.join(caption.split())}", "", f"   {_rst_text(caption)}"]
            lines.append("")
        elif kind == "code":
            text = block[1].rstrip("\n")
            if text.strip():
                lines += [".. code-block:: text", ""]
                lines += [f"   {line}".rstrip() for line in text.splitlines()] + [""]
            else:
                lines += ["(empty)", ""]
    return "\n".join(lines).rstrip("\n") + "\n"
