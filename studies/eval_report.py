"""``fred eval``'s one report a person decides from: ``results/report.md`` and ``speedup.csv``.

Both tables side by side -- the documented platform's speedups (what the model predicts from the
documented inputs) and the calibrated ones (each workload's compute speed fitted on one paper
figure) -- each labelled with what it assumes, every speedup with its interval from the
uncertain inputs (:mod:`studies.uncertainty`), the inputs' ranges and sources, each input's
effect alone, and how the intervals were computed. ``speedup.csv`` holds the same rows (one
block per table), rounded to three decimals, no wall-clock column.
"""

from __future__ import annotations

from pathlib import Path

from sysmodel.workloads import WORKLOADS
from studies.calibration import FABRICS
from studies.report import Markdown

__all__ = ["SPEEDUP_CSV_FIELDS", "speedup_rows", "report_markdown", "write_report", "rounded"]

#: The columns of ``speedup.csv``: one row per (block, fabric, workload); ``low``/``high`` empty
#: when the run had no intervals (``--uncertainty-samples 0``).
SPEEDUP_CSV_FIELDS = ("block", "fabric", "workload", "compute_scale", "speedup", "speedup_low",
                      "speedup_high", "speedup_paper")


def rounded(x, digits: int = 3):
    """A CSV cell: a float to ``digits`` decimals, None as empty, anything else as it is."""
    if x is None:
        return ""
    return f"{x:.{digits}f}" if isinstance(x, float) else x


def _paper(result, fabric: str, workload: str):
    return result.paper_speedup.get(fabric, {}).get(workload)


def _blocks(result) -> list[tuple[str, str, dict, dict]]:
    """``[(name, assumes, {workload: compute scale}, {fabric: {workload: (point, low, high)}})]``:
    the uncertainty blocks when the run made them, else the point tables alone."""
    if result.uncertainty:
        return [(b.name, b.assumes, b.compute_scales,
                 {f: {w: (i.point, i.low, i.high) for w, i in per.items()} for f, per in b.intervals.items()})
                for b in result.uncertainty]
    out = [("documented", "the documented platform", {w: 1.0 for w in WORKLOADS},
            {f: {w: (x, None, None) for w, x in per.items()} for f, per in result.speedup.items()})]
    cal = result.calibration_paper
    if cal is not None:
        out.append(("calibrated", cal.what, {w: fit.compute_scale for w, fit in cal.fitted.items()},
                    {f: {w: (x, None, None) for w, x in per.items()} for f, per in cal.speedup.items()}))
    return out


def speedup_rows(result) -> list[tuple]:
    """The rows of ``speedup.csv`` (:data:`SPEEDUP_CSV_FIELDS`), rounded."""
    rows = []
    for name, _, scales, table in _blocks(result):
        for f in FABRICS:
            for w in WORKLOADS:
                point, low, high = table[f][w]
                rows.append((name, f, w, f"{scales[w]:.4g}", rounded(point), rounded(low),
                             rounded(high), rounded(_paper(result, f, w), 2)))
    return rows


def _cell(value: tuple, paper) -> str:
    point, low, high = value
    text = f"{point:.3f}" if low is None else f"{point:.3f} ({low:.3f}-{high:.3f})"
    return text + (f" [{paper:.2f}]" if paper is not None else "")


def _swing_rows(block, fabric: str) -> list[list[str]]:
    return [[s.workload, s.input, f"{s.at_low:.3f}", f"{s.at_high:.3f}",
             f"{abs(s.at_high - s.at_low):.3f}"] for s in block.swings if s.fabric == fabric]


def report_markdown(result) -> Markdown:
    """The report (see the module's docstring) as a :class:`studies.report.Markdown`."""
    doc = Markdown().heading("FRED evaluation: speedup over the 2D mesh", 1)
    doc.paragraph("Each cell: the speedup at the table's assumptions, in parentheses the smallest "
                  "and largest over the uncertain inputs' ranges (below), in brackets the paper's "
                  "figure (Fred-A/B are not in the paper). Overlap policy of the point values: "
                  f"{result.overlap}.")
    for name, assumes, scales, table in _blocks(result):
        doc.heading(f"{name.capitalize()} table")
        doc.paragraph(f"Assumes: {assumes}.")
        doc.table(["workload", "compute x", *FABRICS],
                  [[w, f"{scales[w]:.3g}", *(_cell(table[f][w], _paper(result, f, w)) for f in FABRICS)]
                   for w in WORKLOADS])
    spread = (result.implied_compute_scale.spread or {}).get(result.overlap)
    if spread is not None and spread.min is not None:
        doc.paragraph(f"The compute speed decides the speedups, and the paper does not give it: its "
                      f"eight Fred-C/D figures imply compute x{spread.min:.3g} to x{spread.max:.3g} "
                      f"faster than the documented NPU ({len(spread.unreachable)} never reached), "
                      "which is why the two tables differ.")
    if not result.uncertainty:
        doc.paragraph("No intervals: this run had `--uncertainty-samples 0`.")
        return doc
    from studies.uncertainty import uncertain_inputs
    block = result.uncertainty[0]
    doc.heading("The uncertain inputs")
    doc.table(["input", "point value", "range", "where the range comes from"],
              [[s.name, f"{s.point:g}", f"{s.low:g} .. {s.high:g}" + (" (log-uniform)" if s.log else ""),
                s.source] for s in uncertain_inputs()]
              + [["overlap policy", result.overlap, "overlap, serialised",
                  "whether the paper's simulator overlaps communication with compute is not stated"]])
    doc.heading("How the intervals were computed")
    doc.paragraph(f"By sampling: {block.samples_per_policy} Latin-hypercube points over the three "
                  "continuous inputs (each range cut into as many equal strata, one point per "
                  "stratum, paired by a seeded permutation: the same every run), each under both "
                  "overlap policies, plus the point value and each input's two range ends: "
                  f"{block.runs} input settings per workload and table, each run on the mesh and "
                  "Fred-A..D. An interval is the smallest and largest speedup "
                  "over these runs: the span of the ranges, not a confidence interval (the inputs "
                  "have ranges, not known distributions). The calibrated table keeps each "
                  "workload's fitted compute factor (fitted at the point values) and multiplies it "
                  "by the compute factor; it is not refitted per sample.")
    for b in result.uncertainty:
        doc.heading(f"Each input alone: Fred-D, {b.name} table", 3)
        doc.paragraph("The speedup at the low and the high end of one input's range (overlap "
                      "policy: overlap, serialised), the others at their point values.")
        doc.table(["workload", "input", "at low end", "at high end", "swing"], _swing_rows(b, "fred-d"))
    return doc


def write_report(path: str | Path, result) -> Path:
    """``report.md`` into ``path``."""
    return report_markdown(result).write(path)
