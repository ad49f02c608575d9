"""Design-space exploration of the FRED fabric (docs/dse.md; ``fred dse``).

For one workload, every :class:`~studies.cost.FabricDesign` of a :class:`DseGrid` (NPUs per
L1, L1-L2 bandwidth per L1, in-switch collectives, middle subnetworks m, chiplet size P, I/O
controllers) is run with every MP x DP x PP strategy (the sweep's: 40 samples per DP replica,
ranked by time per sample). Each design's best strategy gives its time per sample; the cost
model (:mod:`studies.cost`, ``configs/cost.toml``) gives its area and power. Designs are
ranked by time per sample and by performance per cost (samples per second per mm^2 of fabric
silicon); the Pareto front is the set of designs no other design beats on both time per sample
and area. The paper's Fred-D (the cost file's reference design) is the yardstick: the cheapest
design within 5 % of its time per sample is reported.

A design runs on a copy of the platform (:func:`design_platform`) with its L1 size, I/O
controllers and one switch-tree variant ``dse``, and the switch timing of its chiplets
(:func:`studies.cost.design_switch_timing`). Points are plain data (:func:`dse_specs`,
:func:`dse_point`) so that a process pool or a Dask cluster can run them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from hdl.contracts.errors import FredError
from hdl.contracts.placement import factorisations, parse_strategy
from studies.cost import CostModel, FabricDesign, design_switch_timing, fabric_cost
from sysmodel.model_cache import current
from sysmodel.platform import FredVariant, Platform
from studies.points import platform_from_ref, workload_ref
from studies.report import OMIT_NONE, figure, save_png, to_json_dict, write_csv, write_json

__all__ = ["DseGrid", "DSE_FABRIC", "design_platform", "dse_specs", "dse_point", "summarise",
           "pareto_front", "write_dse", "dse_group", "WITHIN", "DseDesign", "DseFinding", "DseSummary", "DseMeta"]

#: Name of the switch-tree variant a design's platform defines.
DSE_FABRIC = "dse"
#: Areas (mm^2) are compared to this many decimals: closer ones are the same cost.
AREA_DECIMALS = 3

#: "Within 5 % of Fred-D": the time-per-sample margin of the cheapest-design finding.
WITHIN = 0.05


@dataclass(frozen=True)
class DseGrid:
    """The values swept per fabric parameter (every combination is a design; with one L1 for
    all NPUs there is no L2, so only the first L1-L2 fraction is kept for it)."""

    npus_per_l1: tuple = (2, 4, 5, 10, 20)
    l1_l2_fraction: tuple = (0.125, 0.25, 0.5, 1.0)
    in_switch: tuple = (False, True)
    middle: tuple = (2, 3)
    chiplet_ports: tuple = (8, 16)
    io_controllers: tuple = (18,)

    def designs(self, platform: Platform, reference: FabricDesign | None = None) -> list[FabricDesign]:
        """Every design of the grid (plus ``reference`` when it is not one of them)."""
        out, seen = [], set()
        for k, f, isw, m, p, io in itertools.product(self.npus_per_l1, self.l1_l2_fraction,
                                                     self.in_switch, self.middle,
                                                     self.chiplet_ports, self.io_controllers):
            if k >= platform.npus:
                f = max(self.l1_l2_fraction)   # no L2: the uplink fraction means nothing
            d = FabricDesign(npus_per_l1=k, l1_l2_fraction=f, in_switch=isw, middle=m,
                             chiplet_ports=p, io_controllers=io)
            if d not in seen:
                seen.add(d)
                out.append(d)
        if reference is not None and reference not in seen:
            out.append(reference)
        return out

    def to_dict(self) -> dict:
        return {k: list(v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class DseDesign:
    """One design of the exploration: its parameters (:class:`~studies.cost.FabricDesign`), its
    cost (:func:`~studies.cost.fabric_cost`), how many of its points ran and fit, and -- when
    one fits -- its best strategy, performance and performance per cost, and its ranks."""

    design: str
    npus_per_l1: int
    l1_l2_fraction: float
    in_switch: bool
    middle: int
    chiplet_ports: int
    io_controllers: int
    l1_l2_gbps: float
    area_mm2: float
    logic_mm2: float
    io_mm2: float
    power_w: float
    chiplets: int
    shoreline_mm: float
    io_depth_mm: float
    cells_from: str
    evaluated: int
    feasible: int
    best_strategy: str | None = field(default=None, metadata=OMIT_NONE)
    time_per_sample_s: float | None = field(default=None, metadata=OMIT_NONE)
    time_s: float | None = field(default=None, metadata=OMIT_NONE)
    exposed_comm_s: float | None = field(default=None, metadata=OMIT_NONE)
    samples_per_s: float | None = field(default=None, metadata=OMIT_NONE)
    samples_per_s_per_mm2: float | None = field(default=None, metadata=OMIT_NONE)
    samples_per_s_per_w: float | None = field(default=None, metadata=OMIT_NONE)
    rank_time: int | None = field(default=None, metadata=OMIT_NONE)
    rank_perf_per_cost: int | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class DseFinding:
    """The paper's Fred-D (the cost file's reference design) against the rest: the cheapest
    design within :data:`WITHIN` of its time per sample, the fastest, the best per cost."""

    reference: str
    reference_time_per_sample_s: float
    reference_area_mm2: float
    reference_strategy: str
    within: float
    cheapest_within: str
    cheapest_within_strategy: str
    cheapest_within_area_mm2: float
    cheapest_within_time_per_sample_s: float
    area_saving: float
    fastest: str
    fastest_time_per_sample_s: float
    best_perf_per_cost: str


@dataclass(frozen=True)
class DseSummary:
    """Every design, the rankings and the Pareto front (design names), and the Fred-D
    finding (None when the reference design did not fit)."""

    designs: list              # [DseDesign]
    by_time: list
    by_perf_per_cost: list
    pareto: list
    reference: DseFinding | None

    def design(self, name: str) -> DseDesign:
        return next(e for e in self.designs if e.design == name)


@dataclass(frozen=True)
class DseMeta:
    """How one workload's exploration ran (the head of ``dse_<workload>.json``)."""

    workload: str
    grid: dict
    cost_model: str
    switch_timing: dict
    samples_per_dp: int
    compute_scale: float
    overlap: bool
    points: int
    cached: int
    failed: list               # [{"spec", "error"}]


def design_platform(platform: Platform, design: FabricDesign) -> Platform:
    """``platform`` with ``design``'s fabric as its only switch-tree variant (``dse``), no mesh
    (the design replaces the wafer's network), and the design's switch timing (made once per
    platform value and design: :mod:`sysmodel.model_cache`, ``design_platforms``)."""
    made_before = current().design_platforms
    key = (platform, design)
    hit = made_before.get(key)
    if hit is not None:
        return hit
    variant = FredVariant(DSE_FABRIC, design.l1_l2_gbps(platform), design.in_switch)
    try:
        made = replace(platform, npus_per_l1=design.npus_per_l1, io_controllers=design.io_controllers,
                       mesh_rows=0, mesh_cols=0, variants={DSE_FABRIC: variant},
                       switch=design_switch_timing(design, platform),
                       # the design's chiplet builds both levels, and its timing above already
                       # composes a logical switch larger than the chiplet (a Clos of chiplets):
                       # the base platform's [fred.chiplets] (the paper's Fred_3(12)/(10)) must
                       # not stay, or every in-switch design whose L1 has more than 12
                       # neighbours is refused as not fitting the paper's chiplet
                       l2_switch=None, chiplets={})
    except FredError as exc:
        raise FredError(f"design {design.name}: {exc}") from None
    return made_before.put(key, made)


def dse_specs(workload: str, ref: dict, designs, *, samples_per_dp: int, overlap: bool,
              strategies=None) -> list[dict]:
    """One spec per (design, strategy); ``strategies``: MP x DP x PP texts (default: every
    factorisation of the NPU count). An unknown workload or malformed strategy is an error
    here, before any point runs."""
    from sysmodel.workload_file import get_workload
    platform = platform_from_ref(ref)
    get_workload(workload)
    workload = workload_ref(workload)
    chosen = factorisations(platform.npus) if strategies is None else [parse_strategy(s) for s in strategies]
    for strategy in chosen:                  # one line now rather than every point failing later
        if strategy.npus > platform.npus:
            raise FredError(f"strategy {strategy} needs {strategy.npus} NPUs; the wafer has "
                            f"{platform.npus}")
    names = [str(s) for s in chosen]
    return [{"kind": "dse", "workload": workload, "design": d.to_dict(), "strategy": s,
             "samples_per_dp": samples_per_dp, "overlap": overlap, "platform": ref}
            for d in designs for s in names]


def dse_group(spec: dict) -> tuple:
    """Which points of a grid one worker of a process pool runs together
    (:func:`fred.parallel.run_points`' ``group``): those of one design and of the designs that
    differ from it only in the chiplets' middle subnetworks ``m``. A design's points share its
    network and the collectives timed on it, and Fred_2(P) and Fred_3(P) differ only in their
    in-switch timing (phase select, configuration load), so the I/O chain plans, which do not
    read it (:func:`sysmodel.collectives._io_chain_plan_key`), are shared too. Where a point
    runs never changes its value."""
    design = dict(spec["design"])
    design.pop("middle", None)
    return tuple(sorted(design.items())) + (spec["workload"], spec.get("cluster") is not None)


def dse_point(spec: dict) -> dict:
    """The sweep row of one (design, strategy) spec, with the design's fields."""
    from studies.evaluation import strategy_row
    from sysmodel.workload_file import get_workload
    design = FabricDesign(**spec["design"])
    if spec.get("cluster"):              # the design on every wafer of a cluster (docs/cluster.md)
        from studies.cluster_points import cluster_dse_row, cluster_from_spec
        p = design_platform(cluster_from_spec(spec["cluster"]).dimensions[0].wafer, design)
        row = cluster_dse_row(spec, p, DSE_FABRIC, get_workload(spec["workload"]), parse_strategy(spec["strategy"]))
        return {"design": design.name, **design.to_dict(), **row}
    p = design_platform(platform_from_ref(spec["platform"]), design)
    row = strategy_row(p, DSE_FABRIC, get_workload(spec["workload"]), parse_strategy(spec["strategy"]),
                       spec["samples_per_dp"], spec["overlap"])
    return {"design": design.name, **design.to_dict(), **row}


def _value(item, key: str):
    return item[key] if isinstance(item, dict) else getattr(item, key)


def pareto_front(items, *, time_key="time_per_sample_s", cost_key="area_mm2") -> list:
    """The items (dicts or dataclasses) no other item beats on both keys (lower is better), by
    increasing cost."""
    front, best = [], math.inf
    for item in sorted(items, key=lambda r: (_value(r, cost_key), _value(r, time_key))):
        if _value(item, time_key) < best:
            front.append(item)
            best = _value(item, time_key)
    return front


def _design_entry(d: FabricDesign, rows: list[dict], platform: Platform, cost: CostModel) -> DseDesign:
    """A design's entry: its cost and, if a strategy fits, the best one's figures."""
    mine = [r for r in rows if r.get("feasible")]
    c = fabric_cost(d, platform, cost)
    best = {}
    if mine:
        b = min(mine, key=lambda r: r["time_per_sample_s"])
        best = dict(best_strategy=b["strategy"], time_per_sample_s=b["time_per_sample_s"],
                    time_s=b["time_s"], exposed_comm_s=b["exposed_comm_s"],
                    samples_per_s=1.0 / b["time_per_sample_s"],
                    samples_per_s_per_mm2=1.0 / b["time_per_sample_s"] / c["area_mm2"],
                    samples_per_s_per_w=1.0 / b["time_per_sample_s"] / c["power_w"])
    return DseDesign(design=d.name, **d.to_dict(), l1_l2_gbps=d.l1_l2_gbps(platform), **c,
                     evaluated=len(rows), feasible=len(mine), **best)


def summarise(rows: list[dict], designs, platform: Platform, cost: CostModel) -> DseSummary:
    """Per design its best strategy, cost and performance per cost; the rankings, the Pareto
    front and the reference (Fred-D) comparison. ``rows``: the points (:func:`dse_point`)."""
    by_design: dict[str, list] = {}
    for r in rows:
        by_design.setdefault(r["design"], []).append(r)
    entries = [_design_entry(d, by_design.get(d.name, []), platform, cost) for d in designs]
    ok = [e for e in entries if e.time_per_sample_s is not None]
    by_time = sorted(ok, key=lambda e: (e.time_per_sample_s, e.area_mm2))
    by_value = sorted(ok, key=lambda e: -e.samples_per_s_per_mm2)
    rank_time = {e.design: rank for rank, e in enumerate(by_time, 1)}
    rank_value = {e.design: rank for rank, e in enumerate(by_value, 1)}
    entries = [replace(e, rank_time=rank_time[e.design], rank_perf_per_cost=rank_value[e.design])
               if e.design in rank_time else e for e in entries]
    ok = [e for e in entries if e.time_per_sample_s is not None]
    ref = next((e for e in ok if e.design == cost.reference.name), None)
    finding = None
    if ref is not None:
        close = [e for e in ok if e.time_per_sample_s <= ref.time_per_sample_s * (1 + WITHIN)]
        # areas equal but for rounding (designs that differ only in how their NPUs are grouped
        # can cost the same silicon to 1e-12) are a tie, which the faster design wins
        cheapest = min(close, key=lambda e: (round(e.area_mm2, AREA_DECIMALS), e.time_per_sample_s))
        finding = DseFinding(
            reference=ref.design, reference_time_per_sample_s=ref.time_per_sample_s,
            reference_area_mm2=ref.area_mm2, reference_strategy=ref.best_strategy, within=WITHIN,
            cheapest_within=cheapest.design, cheapest_within_strategy=cheapest.best_strategy,
            cheapest_within_area_mm2=cheapest.area_mm2,
            cheapest_within_time_per_sample_s=cheapest.time_per_sample_s,
            area_saving=1 - cheapest.area_mm2 / ref.area_mm2,
            fastest=by_time[0].design, fastest_time_per_sample_s=by_time[0].time_per_sample_s,
            best_perf_per_cost=by_value[0].design)
    return DseSummary(designs=entries, by_time=[e.design for e in by_time],
                      by_perf_per_cost=[e.design for e in by_value],
                      pareto=[e.design for e in pareto_front(ok)], reference=finding)


def write_dse(out: Path, workload: str, rows: list[dict], summary: DseSummary,
              meta: DseMeta) -> list[Path]:
    """``dse_<workload>_points.csv`` (every point), ``dse_<workload>_designs.csv`` (per design),
    ``dse_<workload>.json`` (all of it) and ``dse_<workload>_pareto.png``; returns the paths."""
    stem = workload.replace("/", "_").replace(".toml", "").replace(".json", "")
    paths = [out / f"dse_{stem}_points.csv", out / f"dse_{stem}_designs.csv", out / f"dse_{stem}.json",
             out / f"dse_{stem}_pareto.png"]
    write_csv(paths[0], rows)
    write_csv(paths[1], summary.designs)
    write_json(paths[2], {**to_json_dict(meta), "summary": summary, "rows": rows})
    _plot(paths[3], workload, summary)
    return paths


def _plot(path: Path, workload: str, summary: DseSummary) -> None:
    ok = [e for e in summary.designs if e.time_per_sample_s is not None]
    fig, ax = figure(figsize=(8, 5))
    for isw, colour, label in ((False, "tab:blue", "no in-switch collectives"),
                               (True, "tab:orange", "in-switch collectives")):
        pts = [e for e in ok if e.in_switch == isw]
        ax.scatter([e.area_mm2 for e in pts], [e.time_per_sample_s * 1e3 for e in pts],
                   s=14, color=colour, alpha=0.6, label=label)
    front = [e for name in summary.pareto for e in ok if e.design == name]
    ax.plot([e.area_mm2 for e in front], [e.time_per_sample_s * 1e3 for e in front],
            "k-", lw=1, marker="o", ms=4, mfc="none", label="Pareto front")
    ref = summary.reference
    if ref:
        ax.scatter([ref.reference_area_mm2], [ref.reference_time_per_sample_s * 1e3], marker="*",
                   s=160, color="red", label="paper's Fred-D", zorder=5)
        ax.scatter([ref.cheapest_within_area_mm2], [ref.cheapest_within_time_per_sample_s * 1e3],
                   marker="D", s=60, color="green", zorder=5,
                   label=f"cheapest within {100 * ref.within:.0f} % of Fred-D")
    ax.set_xscale("log")
    ax.set_xlabel("fabric silicon area, mm^2 (configs/cost.toml)")
    ax.set_ylabel("time per sample, ms (best strategy)")
    # plain tick values: matplotlib's default offset ("+2.373e2") turned a one-in-a-million
    # spread into the full height of the axis
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    low, high = ax.get_ylim()          # at least +-1 % around the middle: equal times look equal
    middle, half = (low + high) / 2, (high - low) / 2
    half = max(half, 0.01 * abs(middle))
    ax.set_ylim(middle - half, middle + half)
    ax.set_title(f"fred dse: {workload}: time per sample against fabric area")
    ax.legend(fontsize=8)
    save_png(fig, path, dpi=120)
