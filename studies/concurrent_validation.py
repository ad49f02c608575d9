"""Concurrent traffic classes in ``make fabric-validate`` (``fred fabric-validate --switch
packet --concurrent``; docs/fabric_validation.md, "Concurrent traffic classes"): the
scenarios of :mod:`studies.concurrent_case` on the packet fabrics (in-switch collectives on
Fred-B/D, endpoint algorithms as online unicasts on Fred-A/C, each class on its VC), at a
latency-bound size (MP and PP classes at the smallest size under the DP load at the largest)
and a bandwidth-bound one (every class at the largest), RTL against the model's priority
engine, into a block of their own."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from studies.report import Column, Markdown, replace_marked_block

__all__ = ["CONCURRENT_TOLERANCE", "CONCURRENT_MARKERS", "MP_DELAY", "ConcurrentRow",
           "concurrent_cases", "concurrent_rows", "case_label", "concurrent_block", "write_concurrent_validation"]

#: The agreement asked for concurrent classes (completion and the MP class's latency).
CONCURRENT_TOLERANCE = 0.10
CONCURRENT_MARKERS = ("<!-- fabric-validate-concurrent:begin -->",
                      "<!-- fabric-validate-concurrent:end -->")
#: Cycles after the start before the MP class of ``mp-under-dp`` (the DP class of
#: ``dp-under-io``) sends: the load is then streaming through every switch (its first packets
#: cross the fabric in under 100 cycles).
MP_DELAY = 200
#: The scenarios whose second class starts ``MP_DELAY`` cycles after the load.
DELAYED = ("mp-under-dp", "dp-under-io", "dp-under-write", "dp-under-far-write")


@dataclass(frozen=True)
class ConcurrentRow:
    """One class of one concurrent case: completion and latency (completion - its delay) on
    both sides, its latency alone on both sides, the flits its endpoints checked."""

    fabric: str
    scenario: str
    name: str
    size_flits: int
    delay: int
    model_cycles: float
    rtl_cycles: int
    model_latency: float
    rtl_latency: int
    model_alone: float
    rtl_alone: int
    flits_checked: int

    @property
    def ratio(self) -> float:
        return self.rtl_cycles / self.model_cycles

    @property
    def latency_ratio(self) -> float:
        return self.rtl_latency / self.model_latency

    @property
    def within(self) -> bool:
        return abs(self.ratio - 1) <= CONCURRENT_TOLERANCE and \
            abs(self.latency_ratio - 1) <= CONCURRENT_TOLERANCE


def concurrent_cases(fabrics, sizes, *, characterization=None, **spec_overrides):
    """``(cases, refused)``: every scenario on every fabric among ``fabrics`` at the two sizes
    (``sizes``' smallest and largest), modelled (nothing built); ``refused`` lists (fabric,
    why) for a fabric the scenarios do not run on (none of Fred-A..D so far)."""
    from studies.concurrent_case import SCENARIOS, build_concurrent_case
    small, large = min(sizes), max(sizes)
    cases, refused = [], []
    for fabric in fabrics:
        for scenario in SCENARIOS:
            for size in dict.fromkeys((small, large)):
                delay = MP_DELAY if scenario in DELAYED else 0
                cases.append(build_concurrent_case(
                    fabric=fabric, scenario=scenario, size=size, load_size=large, delay=delay,
                    characterization=characterization, **spec_overrides))
    return cases, refused


def concurrent_rows(case) -> list[ConcurrentRow]:
    """The rows of a :class:`~studies.concurrent_case.ConcurrentCase` the RTL has run."""
    return [ConcurrentRow(case.spec.name, case.scenario, cls.name, cls.request.size_flits,
                          cls.delay, m["cycles"], r["cycles"], m["latency"], r["latency"],
                          m["alone"], r["alone"], r["flits_checked"])
            for cls, m, r in zip(case.classes, case.model, case.rtl)]


_COLUMNS = (
    Column("fabric", "fabric"), Column("scenario", "scenario"), Column("class", "name"),
    Column("flits", "size_flits", rule="---:"), Column("from cycle", "delay", rule="---:"),
    Column("model completion", "model_cycles", ".1f", rule="---:"),
    Column("RTL completion", "rtl_cycles", rule="---:"),
    Column("RTL/model", lambda r: f"{r.ratio:.3f}" + ("" if abs(r.ratio - 1) <= CONCURRENT_TOLERANCE
                                                      else " **!**"), rule="---:"),
    Column("model latency (alone)", lambda r: f"{r.model_latency:.1f} ({r.model_alone:.1f})",
           rule="---:"),
    Column("RTL latency (alone)", lambda r: f"{r.rtl_latency} ({r.rtl_alone})", rule="---:"),
    Column("flits checked", "flits_checked", rule="---:"),
)


def case_label(case) -> str:
    """A concurrent case in a report: fabric, scenario and each class's size."""
    sizes = ", ".join(f"{cls.name} {cls.request.size_flits}" for cls in case.classes)
    return f"{case.spec.name} {case.scenario} ({sizes} flits)"


def concurrent_block(rows, command: str, date: str, host: str, refused=(), failed=()) -> str:
    """The block between :data:`CONCURRENT_MARKERS`. ``failed``: ``(case label, classes,
    why)`` of cases the RTL did not complete (a watchdog, wrong data): their classes count as
    not within."""
    begin, end = CONCURRENT_MARKERS
    within = sum(r.within for r in rows)
    total = len(rows) + sum(n for _, n, _ in failed)
    doc = Markdown().raw(begin).paragraph(
        f"Generated by `{command}` on {date} ({host}). **{within}/{total} classes** agree "
        f"within {CONCURRENT_TOLERANCE:.0%} (completion and latency). Latency = completion - "
        f"the class's start; alone = the class run by itself on the same fabric.")
    doc.table(_COLUMNS, rows)
    if failed:
        doc.paragraph("**Did not complete on the RTL** (every class counted as not within): "
                      + "; ".join(f"{label}: {why}" for label, _, why in failed) + ".")
    if refused:
        doc.paragraph("Not run: " + "; ".join(f"{f} ({why})" for f, why in refused) + ".")
    doc.raw(end)
    return "\n".join(doc.lines)


def write_concurrent_validation(rows, output: Path, command: str, date: str, host: str,
                                refused=(), failed=()) -> None:
    """The block in ``output`` between :data:`CONCURRENT_MARKERS` (text around it kept)."""
    replace_marked_block(Path(output), *CONCURRENT_MARKERS,
                         concurrent_block(rows, command, date, host, refused, failed),
                         new_document_head="# The fabric RTL against the system model\n\n")
