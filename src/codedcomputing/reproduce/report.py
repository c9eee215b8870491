"""A report as a list of blocks, written as Markdown (figures linked beside it) and as one
self-contained HTML file (figures embedded as base64 PNG, no external style or script).

The blocks are built once (:class:`Document`) and rendered twice, so the two files say the
same thing; text is escaped for each format (``|`` in Markdown tables, ``<&>`` in HTML).
"""

from __future__ import annotations

import base64
import html
import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Document", "to_html", "to_markdown"]


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
