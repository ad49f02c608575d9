"""Aligned text tables for the console output of the ``fred`` commands."""

from __future__ import annotations

__all__ = ["format_table"]


def format_table(header, rows, *, align: str | None = None, title: str | None = None,
                 indent: int = 0) -> str:
    """``rows`` (sequences of cells, each printed with ``str``) under ``header`` as a text table
    with every column as wide as its widest cell, a rule under the header and two spaces
    between columns.

    ``align``: one character per column, ``l`` (left) or ``r`` (right); default: the first
    column left, the others right (labels, then figures). ``title``: a line above the table.
    ``indent``: spaces before every table line. Returns the lines joined by newlines (no
    trailing newline)."""
    header = [str(h) for h in header]
    rows = [[str(c) for c in row] for row in rows]
    columns = len(header)
    for row in rows:
        if len(row) != columns:
            raise ValueError(f"table row has {len(row)} cells, the header {columns}: {row}")
    align = align or "l" + "r" * (columns - 1)
    if len(align) != columns or set(align) - {"l", "r"}:
        raise ValueError(f"align {align!r} must be one 'l' or 'r' per column ({columns})")
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(columns)]

    def line(cells) -> str:
        text = "  ".join(c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(cells, widths, align))
        return " " * indent + text.rstrip()

    out = [title] if title else []
    out += [line(header), " " * indent + "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out)
