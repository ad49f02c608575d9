"""The paper's Fig. 9 collectives on the RTL fabrics against the system model: the rows of
``fred fabric-validate``, their summary, and the block it writes into
``docs/fabric_validation.md`` (between the fabric-validate markers) with its plot.

Each case is a :class:`~studies.fabric_case.FabricCase` (built and run by
:mod:`studies.fabric_case`); :func:`validation_row` reads the figures this report shows from it.
"""

from __future__ import annotations

import datetime
import os
import platform as host
from dataclasses import dataclass, field
from pathlib import Path

from studies.report import OMIT_NONE, Column, Markdown, figure, replace_marked_block, save_png

__all__ = ["CASES", "IO_CASES", "IO_FP16_BACKPRESSURE", "io_variants", "TOLERANCE", "BEGIN", "END",
           "MARKERS", "FabricValidationRow", "FabricValidation", "validation_row", "summarise",
           "run_stamp", "markdown_block", "write_fabric_validation"]

#: (label, request arguments) of the paper's Fig. 9 microbenchmarks (shared spec FRED.md sec. 4)
CASES = (
    ("wafer all-reduce", dict(op="all-reduce", group="wafer")),
    ("MP2-DP5-PP2 MP all-reduce", dict(op="all-reduce", strategy="MP2-DP5-PP2", dim="mp")),
    ("MP2-DP5-PP2 DP all-reduce", dict(op="all-reduce", strategy="MP2-DP5-PP2", dim="dp")),
    ("MP2-DP5-PP2 PP multicast", dict(op="multicast", strategy="MP2-DP5-PP2", dim="pp")),
)
#: (label, request arguments) of the I/O cases on the packet fabric (``fred fabric-validate
#: --switch packet --io``; docs/fabric_validation.md, "I/O controllers (packet fabric)"): weight
#: streaming and gradient reduce-out, one controller per group (the wafer's one, and one per
#: MP2-DP5-PP2 DP group).
IO_CASES = (
    ("wafer io-broadcast", dict(op="io-broadcast", group="wafer")),
    ("wafer io-reduce", dict(op="io-reduce", group="wafer")),
    ("MP2-DP5-PP2 DP io-broadcast", dict(op="io-broadcast", strategy="MP2-DP5-PP2", dim="dp")),
    ("MP2-DP5-PP2 DP io-reduce", dict(op="io-reduce", strategy="MP2-DP5-PP2", dim="dp")),
)
#: The NPU sinks' refusal probability of the I/O block's fp16 rows (each cycle, each NPU).
IO_FP16_BACKPRESSURE = 0.3
#: The agreement asked for, |RTL / model - 1| (docs/fabric_validation.md).
TOLERANCE = 0.05
BEGIN, END = "<!-- fabric-validate:begin -->", "<!-- fabric-validate:end -->"
#: The markers of each switch's block (``fred fabric-validate --switch``): the circuit
#: fabric's, and the packet fabric's beside it.
MARKERS = {"circuit": (BEGIN, END),
           "packet": ("<!-- fabric-validate-packet:begin -->", "<!-- fabric-validate-packet:end -->"),
           "packet-io": ("<!-- fabric-validate-packet-io:begin -->",
                         "<!-- fabric-validate-packet-io:end -->")}


def io_variants(sizes, dtype: str | None = None, backpressure: float = 0.0) -> list[tuple[str, int, float]]:
    """The I/O block's ``(dtype, flits, NPU sink backpressure)`` runs of every case: int32 at
    every one of ``sizes`` with ``backpressure``, and fp16 at the smallest size with
    :data:`IO_FP16_BACKPRESSURE` (or ``backpressure`` when it is not 0). Why the smallest: a
    latency-bound run is where fp16's longer adders and forwarding show in the cycles (at
    4000 flits the controller's 16/375 hides them), and it is the short run (about 1,000
    cycles, against 94,000). ``dtype``: only that format's runs (None: both)."""
    if dtype not in (None, "int32", "fp16"):
        from hdl.contracts.errors import FredError
        raise FredError(f"the I/O block runs int32 and fp16; got --dtype {dtype}")
    out = []
    if dtype in (None, "int32"):
        out += [("int32", size, backpressure) for size in sizes]
    if dtype in (None, "fp16"):
        out.append(("fp16", min(sizes), backpressure or IO_FP16_BACKPRESSURE))
    return out


@dataclass(frozen=True)
class FabricValidationRow:
    """One case on one fabric at one size: the model's cycles (and their parts), the RTL's,
    their ratio and the flits the RTL delivered and the harness checked."""

    fabric: str
    case: str
    size_flits: int
    algorithm: str
    model_cycles: float
    model_bandwidth_cycles: float
    model_latency_cycles: float
    model_phase_cycles: float
    model_phases: int
    busiest_link: str
    rtl_cycles: int
    ratio: float
    flits_checked: int
    cycles_per_s: float
    #: the data format and the NPU sinks' refusal probability of the run (the I/O block's columns)
    dtype: str = "int32"
    sink_backpressure: float = 0.0

    @property
    def within(self) -> bool:
        return abs(self.ratio - 1) <= TOLERANCE


@dataclass(frozen=True)
class FabricValidation:
    """Every row, how many agree within ``tolerance``, the worst, and the run's command, date
    and host (``fred fabric-validate --json``; ``output``/``plot`` once written)."""

    cases: tuple
    tolerance: float
    within_tolerance: int
    worst: FabricValidationRow
    command: str
    date: str
    host: str
    output: str | None = field(default=None, metadata=OMIT_NONE)
    plot: str | None = field(default=None, metadata=OMIT_NONE)


def validation_row(label: str, case) -> FabricValidationRow:
    """The row of a :class:`~studies.fabric_case.FabricCase` that the RTL has run."""
    est, rtl = case.estimate, case.rtl
    return FabricValidationRow(
        fabric=case.spec.name, case=label, size_flits=case.request.size_flits,
        algorithm=est.algorithm, model_cycles=est.cycles,
        model_bandwidth_cycles=est.bandwidth_cycles, model_latency_cycles=est.latency_cycles,
        model_phase_cycles=est.phase_cycles, model_phases=est.phases,
        busiest_link=est.busiest_link, rtl_cycles=rtl.cycles, ratio=case.ratio,
        flits_checked=rtl.flits_checked, cycles_per_s=rtl.cycles_per_s, dtype=case.spec.dtype,
        sink_backpressure=float(case.options.get("sink_backpressure") or 0.0))


def run_stamp() -> tuple[str, str]:
    """(today's date and time, UTC; this host) for a generated block."""
    return (datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            f"{host.machine()}, {os.cpu_count()} CPUs, Python {host.python_version()}")


def summarise(rows, command: str) -> FabricValidation:
    """The summary of ``rows``, stamped with ``command``, today's date (UTC) and this host."""
    rows = tuple(rows)
    date, machine = run_stamp()
    return FabricValidation(
        cases=rows, tolerance=TOLERANCE, within_tolerance=sum(r.within for r in rows),
        worst=max(rows, key=lambda r: abs(r.ratio - 1)), command=command, date=date, host=machine)


def _model_cell(r: FabricValidationRow) -> str:
    return (f"{r.model_cycles:.1f} ({r.model_bandwidth_cycles:.0f} + {r.model_latency_cycles:.0f} "
            f"+ {r.model_phase_cycles:.0f})")


_COLUMNS = (
    Column("fabric", "fabric"), Column("case", "case"), Column("flits", "size_flits", rule="---:"),
    Column("algorithm", "algorithm"),
    Column("model cycles (link + latency + phases)", _model_cell, rule="---:"),
    Column("RTL cycles", "rtl_cycles", rule="---:"),
    Column("RTL/model", lambda r: f"{r.ratio:.3f}" + ("" if r.within else " **!**"), rule="---:"),
    Column("flits checked", "flits_checked", rule="---:"),
)
#: The I/O block's: the data format and the sinks' backpressure of each run beside the size.
_IO_COLUMNS = (*_COLUMNS[:3], Column("data", "dtype"),
               Column("NPU sink backpressure", lambda r: f"{r.sink_backpressure:g}", rule="---:"),
               *_COLUMNS[3:])


def markdown_block(result: FabricValidation, plot: Path, output: Path,
                   switch: str = "circuit", refused=()) -> str:
    """The block between ``switch``'s markers (:data:`MARKERS`): the run, the agreement, the
    table and the plot (linked relative to ``output``'s folder when it is below it)."""
    begin, end = MARKERS[switch]
    w = result.worst
    try:
        rel = plot.resolve().relative_to(output.resolve().parent)
    except ValueError:
        rel = plot
    doc = Markdown().raw(begin).paragraph(
        f"Generated by `{result.command}` on {result.date} ({result.host}). "
        f"**{result.within_tolerance}/{len(result.cases)} cases** agree within "
        f"{result.tolerance:.0%}; the worst is {w.fabric} {w.case} at {w.size_flits} flits "
        f"(RTL/model {w.ratio:.3f}).")
    doc.table(_IO_COLUMNS if switch == "packet-io" else _COLUMNS, result.cases)
    if refused:   # (fabric, case, flits, why): cases this fabric cannot run, with the reason
        doc.paragraph("Not run (refused before any build): " + "; ".join(
            f"{f} {label} at {size} flits ({why})" for f, label, size, why in refused) + ".")
    doc.image("RTL vs model cycles", rel.as_posix()).blank().raw(end)
    return "\n".join(doc.lines)


def write_fabric_validation(result: FabricValidation, output: Path, plot: Path,
                            switch: str = "circuit", refused=()) -> None:
    """The plot at ``plot`` and the block in ``output`` (between ``switch``'s markers, keeping
    the text around them; the document is created if missing)."""
    _plot(result.cases, plot, switch)
    begin, end = MARKERS[switch]
    replace_marked_block(output, begin, end, markdown_block(result, plot, output, switch, refused),
                         new_document_head="# The fabric RTL against the system model\n\n")


def _plot(rows, path: Path, switch: str = "circuit") -> None:
    fig, ax = figure(figsize=(6.5, 5))
    markers = {"fred-a": "o", "fred-b": "s", "fred-c": "^", "fred-d": "D"}
    for fabric in sorted({r.fabric for r in rows}):
        mine = [r for r in rows if r.fabric == fabric]
        ax.scatter([r.model_cycles for r in mine], [r.rtl_cycles for r in mine],
                   marker=markers.get(fabric, "x"), label=fabric)
    lo = min(min(r.model_cycles, r.rtl_cycles) for r in rows) * 0.8
    hi = max(max(r.model_cycles, r.rtl_cycles) for r in rows) * 1.25
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8, label="RTL = model")
    for k in (1 - TOLERANCE, 1 + TOLERANCE):
        ax.plot([lo, hi], [lo * k, hi * k], "k:", lw=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("system model (cycles)")
    ax.set_ylabel("RTL under Verilator (cycles)")
    what = ("I/O ops on the RTL fabric, packet switches" if switch == "packet-io"
            else f"Fig. 9 collectives on the RTL fabric, {switch} switches")
    ax.set_title(f"{what} (dotted: +-{TOLERANCE:.0%})")
    ax.legend()
    save_png(fig, path, dpi=120)
