"""The one writer of every file the studies emit: Markdown, CSV, JSON and PNG.

Every study result is a frozen dataclass; :func:`to_json_dict` turns one into the plain data
its JSON holds (the field names are the keys), so the JSON is written from the types and a
renamed field renames the key everywhere at once. The primitives:

* :class:`Markdown`: a document built from headings, paragraphs, lists, tables (rows of
  dataclasses or tuples, one format per column) and images, rendered to text;
* :func:`write_text`, :func:`write_json`, :func:`write_csv`, :func:`save_png`: each writes
  atomically (a temporary file in the same folder, then renamed over the target, so a reader
  never sees half a file and a failure leaves the old file), and an error names the file;
* :func:`check_writable`: call it before the work, so an unwritable output fails at once with
  one line naming the path instead of after minutes of computing;
* :func:`replace_marked_block`: rewrite the text between two marker lines of a document,
  keeping the hand-written text around them.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hdl.contracts.errors import FredError

__all__ = ["OMIT_NONE", "to_json_dict", "Markdown", "Column", "write_text", "write_bytes",
           "write_json", "write_csv", "csv_text", "save_png", "check_writable",
           "replace_marked_block", "figure", "pyplot", "table_lines", "table_text"]

#: ``dataclasses.field(metadata=OMIT_NONE)``: the key is left out of the JSON (and of the CSV
#: row) when the field is None -- for results whose key exists only in some cases (a strategy
#: that does not fit has no breakdown).
OMIT_NONE = {"json_omit_none": True}


# -- JSON ---------------------------------------------------------------------------------------
def to_json_dict(obj: Any) -> Any:
    """``obj`` as plain JSON data: a dataclass as ``{field name: value}`` (fields marked
    :data:`OMIT_NONE` left out when None), recursively through dicts, lists and tuples (tuples
    become lists); an object with a ``to_dict()`` method (the contracts' and the model's own
    records) as what that returns; numpy scalars and arrays by ``tolist()``; paths as strings.
    Floats stay floats (``inf`` included: :func:`json.dumps` writes ``Infinity``). Anything
    else is an error naming its type."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type) and not hasattr(obj, "to_dict"):
        return {f.name: to_json_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if not (f.metadata.get("json_omit_none") and getattr(obj, f.name) is None)}
    if isinstance(obj, dict):
        return {_key(k): to_json_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json_dict(v) for v in obj]
    if hasattr(obj, "to_dict"):
        return to_json_dict(obj.to_dict())
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"cannot write {type(obj).__name__} as JSON: {obj!r}")


def _key(k) -> str | int | float | bool | None:
    return k if k is None or isinstance(k, (str, int, float, bool)) else str(k)


# -- files --------------------------------------------------------------------------------------
def check_writable(path: str | Path, *, folder: bool = False) -> Path:
    """Fail now, with one line naming ``path``, if a file there (or, with ``folder``, files in
    that folder) cannot be written: its parent (nearest existing ancestor) must be a writable
    folder and the path itself not a folder (a file, with ``folder``). Nothing is created."""
    path = Path(path)
    target = path if folder else path.parent
    if folder and path.exists() and not path.is_dir():
        raise FredError(f"cannot write into {path}: it is a file, not a folder")
    if not folder and path.is_dir():
        raise FredError(f"cannot write {path}: it is a folder")
    probe = target
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise FredError(f"cannot write {path}: {probe} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise FredError(f"cannot write {path}: {probe} is not writable")
    return path


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (parents created); an error names the file."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            if path.exists():   # keep the permissions the file had
                os.chmod(tmp, path.stat().st_mode & 0o7777)
            else:
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise FredError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; see :func:`write_bytes`."""
    return write_bytes(path, text.encode())


def write_json(path: str | Path, obj: Any, *, indent: int = 2, sort_keys: bool = True,
               trailing_newline: bool = False) -> Path:
    """``obj`` (dataclasses included, :func:`to_json_dict`) as JSON into ``path``, atomically."""
    text = json.dumps(to_json_dict(obj), indent=indent, sort_keys=sort_keys)
    return write_text(path, text + ("\n" if trailing_newline else ""))


def _row_dict(row, fields) -> dict:
    if isinstance(row, (tuple, list)):
        if fields is None or len(row) != len(fields):
            raise ValueError(f"a CSV row given as a sequence needs one cell per field {fields}: {row!r}")
        return dict(zip(fields, row))
    if dataclasses.is_dataclass(row):
        return to_json_dict(row)
    return dict(row)


def csv_text(rows: Iterable, fields: Sequence[str] | None = None, *,
             formats: dict[str, Callable[[Any], Any]] | None = None) -> str:
    """CSV of ``rows`` (dataclasses, dicts, or sequences of one cell per field) under the
    header ``fields`` (default: every key in first-seen order); a key a row lacks (or a None
    value) is an empty cell; ``formats``: per field, a function from the value to the cell."""
    rows = [_row_dict(r, fields) for r in rows]
    if fields is None:
        fields = []
        for r in rows:
            fields += [k for k in r if k not in fields]
    formats = formats or {}
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\r\n")   # the csv module's default dialect
    w.writerow(fields)
    for r in rows:
        w.writerow([formats[f](r[f]) if f in formats and r.get(f) is not None else r.get(f)
                    for f in fields])
    return out.getvalue()


def write_csv(path: str | Path, rows: Iterable, fields: Sequence[str] | None = None, *,
              formats: dict[str, Callable[[Any], Any]] | None = None) -> Path:
    """:func:`csv_text` into ``path``, atomically."""
    return write_text(path, csv_text(rows, fields, formats=formats))


def pyplot():
    """``matplotlib.pyplot`` on the file-only ``Agg`` backend, imported on first use (about
    0.3 s: a process that forks plotting children imports it once, before the forks)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def figure(*args, **kwargs):
    """A new matplotlib figure on the file-only ``Agg`` backend: ``plt.subplots(*args,
    **kwargs)``."""
    return pyplot().subplots(*args, **kwargs)


def save_png(fig, path: str | Path, *, dpi: int = 120, tight: bool = True,
             metadata: dict | None = None) -> Path:
    """Save ``fig`` as a PNG at ``path`` atomically (``tight_layout`` first unless ``tight`` is
    false) and close it; ``metadata``: PNG text chunks (``{"Software": None}`` drops the
    matplotlib version, so the file does not change with it)."""
    import matplotlib.pyplot as plt
    if tight:
        fig.tight_layout()
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=dpi, **({"metadata": metadata} if metadata is not None else {}))
    finally:
        plt.close(fig)
    return write_bytes(path, buffer.getvalue())


def replace_marked_block(path: str | Path, begin: str, end: str, block: str, *,
                         new_document_head: str = "") -> Path:
    """Put ``block`` (which starts with ``begin`` and ends with ``end``) into ``path``: in place
    of the text between the markers when both are there, else appended; a missing file is
    created as ``new_document_head`` + ``block``."""
    path = Path(path)
    if path.is_file():
        text = path.read_text()
        if begin in text and end in text:
            head, rest = text.split(begin, 1)
            return write_text(path, head + block + rest.split(end, 1)[1])
        return write_text(path, text.rstrip("\n") + "\n\n" + block + "\n")
    return write_text(path, new_document_head + block + "\n")


# -- Markdown -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Column:
    """One table column: its header, how to get the cell from a row (an attribute or key
    name, an index, or a function of the row) and how to format the value (a format spec such
    as ``".3f"``, a function, or None for ``str``)."""

    header: str
    get: str | int | Callable[[Any], Any] | None = None
    format: str | Callable[[Any], str] | None = None
    #: the Markdown alignment rule of the column: ``---``, ``---:`` or ``:---``
    rule: str = "---"

    def cell(self, row, index: int) -> str:
        getter = self.get if self.get is not None else index
        if callable(getter):
            value = getter(row)
        elif isinstance(getter, int):
            value = row[getter]
        elif isinstance(row, dict):
            value = row[getter]
        else:
            value = getattr(row, getter)
        if callable(self.format):
            return self.format(value)
        return str(value) if self.format is None else format(value, self.format)


class Markdown:
    """A Markdown document built line by line; :meth:`text` renders it.

    Blocks are separated by one empty line as they are added; the methods return the document
    so calls chain. The text is exactly the lines added (no reflowing), so a generated document
    stays byte-for-byte what the writer asked for."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def _block(self, lines: Iterable[str]) -> "Markdown":
        if self.lines and self.lines[-1] != "":
            self.lines.append("")
        self.lines.extend(lines)
        return self

    def heading(self, text: str, level: int = 2) -> "Markdown":
        return self._block(["#" * level + " " + text])

    def paragraph(self, text: str) -> "Markdown":
        return self._block([text])

    def bullets(self, items: Iterable[str], marker: str = "*") -> "Markdown":
        """A list, one item a line, each after ``marker`` (``*`` or ``-``) and a space."""
        return self._block([f"{marker} {x}" for x in items])

    def image(self, alt: str, target: str) -> "Markdown":
        return self._block([f"![{alt}]({target})"])

    def raw(self, *lines: str) -> "Markdown":
        """Lines as they are (no separating empty line)."""
        self.lines.extend(lines)
        return self

    def blank(self) -> "Markdown":
        self.lines.append("")
        return self

    def table(self, columns: Sequence[Column | str], rows: Iterable) -> "Markdown":
        """A table of ``rows`` (dataclasses, dicts or tuples): one :class:`Column` per column
        (a plain string is a header whose cells are the row's items in order)."""
        return self._block(table_lines(columns, rows))

    def text(self) -> str:
        """The document, ending with one newline."""
        return "\n".join(self.lines) + "\n"

    def write(self, path: str | Path) -> Path:
        return write_text(path, self.text())


def table_lines(columns: Sequence[Column | str], rows: Iterable) -> list[str]:
    """The lines of a Markdown table (header, rule, one line per row); see :meth:`Markdown.table`."""
    columns = [c if isinstance(c, Column) else Column(c) for c in columns]
    out = ["| " + " | ".join(c.header for c in columns) + " |",
           "|" + "|".join(c.rule for c in columns) + "|"]
    for row in rows:
        out.append("| " + " | ".join(c.cell(row, i) for i, c in enumerate(columns)) + " |")
    return out


def table_text(columns: Sequence[Column | str], rows: Iterable) -> str:
    """:func:`table_lines` joined by newlines (no newline at the end)."""
    return "\n".join(table_lines(columns, rows))


def fmt_number(x, digits: int = 3) -> str:
    """A figure for a report: None as ``-``, a whole float without decimals, else at most
    ``digits`` decimals with trailing zeros dropped."""
    if x is None:
        return "-"
    if isinstance(x, float):
        if math.isfinite(x) and x == int(x):
            return f"{int(x)}"
        return f"{x:.{digits}f}".rstrip("0").rstrip(".")
    return str(x)
