"""The optical study (docs/optical.md): WRHT's formulas and its comparisons, an optical
(WRHT) scale-out against the electrical switch for the cluster of FRED wafers, and the
bandwidth optimizer's split per workload.

Tables, each computed here from the model (nothing stored):

* :func:`wrht_formula_table`: WRHT's group size, steps, wavelengths and longest path on a range
  of rings (the formulas of :mod:`sysmodel.optical`);
* :func:`headline_table`: WRHT's all-reduce time against optical ring and recursive doubling
  and electrical ring and recursive doubling, on 1,024 nodes over message sizes (assumed
  parameters, :data:`HEADLINE_SETUP`);
* :func:`latency_ratio_table`: WRHT's reduction against the optical ring as a function of
  ``x`` = one message's transfer time / one step's latency: where the paper's headline
  reductions can come from;
* :func:`cluster_table`: the 50 FRED wafers with an electrical switch, an optical WRHT ring, an
  optical ring running ring all-reduce, and an optical WRHT ring of the switch's cost per NPU;
* :func:`optimizer_table`: the optimizer's rack/spine split per workload.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from hdl.contracts.errors import FredError
from studies.bandwidth_optimizer import NetworkCost, optimize_bandwidth, workload_time_function
from studies.cost import load_cost_model
from sysmodel.cluster_training import simulate_cluster_iteration
from sysmodel.dimensions import Dimension, load_cluster, with_bandwidth
from sysmodel.multidim_collectives import run_collective
from sysmodel.optical import (OpticalRing, allreduce_time, plan_allreduce, wrht_group_size, wrht_levels,
                              wrht_wavelengths)
from sysmodel.workload_file import get_workload
from sysmodel.workloads import WORKLOADS

__all__ = ["HEADLINE_SETUP", "wrht_formula_table", "headline_table", "latency_ratio_table",
           "cluster_table", "optimizer_table", "render", "PAPER_CROSSOVER_BYTES", "ring_rd_crossover",
           "crossover_table"]

#: The comparison's parameters. ASSUMED: the WRHT paper's own setup (node counts, wavelengths,
#: rates, latencies, the electrical baseline) was not in any text reachable here. 1,024 nodes
#: (the node count OpTree's abstract names for its ring), 64 wavelengths, 5 GBps (40 Gb/s) per
#: wavelength, 1 us of O/E/O per step, 0.02 dB per hop and 20 dB of budget (the longest WRHT path,
#: 512 hops, then costs 10.2 dB); electrical: 12.5 GBps (100 Gb/s) per node, 1 us per step.
HEADLINE_SETUP = {"nodes": 1024, "optical": OpticalRing(64, 5.0, 1000.0, 0.02, 20.0),
                  "electrical_gbps": 12.5, "electrical_latency_ns": 1000.0}
#: message sizes: 1 MB .. 1 GB, and the gradients of this project's ResNet-152 (120 MB, FP16)
SIZES = (1e6, 1e7, 1.2e8, 1e9)


def wrht_formula_table(nodes=(8, 9, 10, 50, 81, 82, 1024), wavelengths=(1, 4, 64)) -> list[dict]:
    rows = []
    for n in nodes:
        for w in wavelengths:
            m = wrht_group_size(n, w)
            levels = wrht_levels(n, m)
            plan = plan_allreduce(OpticalRing(w, 1.0, 0.0, 0.0, 1e9), "wrht", n, 1.0)
            rows.append({"nodes": n, "wavelengths": w, "group": m, "levels": levels, "steps": plan.steps,
                         "wavelengths_needed": wrht_wavelengths(m) if n > 1 else 0, "longest_hops": plan.hops})
    return rows


def _electrical(algorithm: str, n: int, size: float, gbps: float, latency_ns: float) -> float:
    """Electrical all-reduce (each node one port of ``gbps``; a non-blocking switch): ring
    ``2 (n-1) (S/(n B) + L)``; recursive doubling ``log2 n (S/B + L)``."""
    b, lat = gbps * 1e9, latency_ns * 1e-9
    if algorithm == "ring":
        return 2 * (n - 1) * (size / (n * b) + lat)
    steps = n.bit_length() - 1
    return steps * (size / b + lat)


def headline_table(setup=HEADLINE_SETUP, sizes=SIZES) -> list[dict]:
    n, ring = setup["nodes"], setup["optical"]
    rows = []
    for size in sizes:
        t = {a: plan_allreduce(ring, a, n, size).time_s(ring) for a in ("wrht", "ring", "recursive-doubling")}
        e = {a: _electrical(a, n, size, setup["electrical_gbps"], setup["electrical_latency_ns"])
             for a in ("ring", "recursive-doubling")}
        rows.append({"size": size, "wrht_s": t["wrht"], "optical_ring_s": t["ring"],
                     "optical_rd_s": t["recursive-doubling"], "electrical_ring_s": e["ring"],
                     "electrical_rd_s": e["recursive-doubling"],
                     "vs_optical_ring": 1 - t["wrht"] / t["ring"],
                     "vs_optical_rd": 1 - t["wrht"] / t["recursive-doubling"],
                     "vs_electrical_ring": 1 - t["wrht"] / e["ring"],
                     "vs_electrical_rd": 1 - t["wrht"] / e["recursive-doubling"]})
    return rows


def latency_ratio_table(n: int = 1024, wavelengths: int = 64, xs=(0.1, 1, 10, 100, 107.5, 1000, 1e4, 1e5)) -> list[dict]:
    """WRHT against the optical ring with ``x`` = S / (b d): reduction = 1 - 2L (x+1) /
    (2 (n-1) (x/n + 1))."""
    levels = wrht_levels(n, wrht_group_size(n, wavelengths))
    return [{"x": x, "levels": levels,
             "reduction": 1 - 2 * levels * (x + 1) / (2 * (n - 1) * (x / n + 1))} for x in xs]


def _optical_variants(electrical):
    """The electrical FRED-wafer cluster's scale-out replaced by optical rings (the shipped
    cluster-fred-wafers-optical.toml, its ring-algorithm twin, and a WRHT ring costing per NPU
    what the electrical switch costs)."""
    optical = load_cluster("cluster-fred-wafers-optical.toml")
    out = optical.dimensions[1]
    ring_alg = replace(optical, dimensions=(optical.dimensions[0], replace(out, algorithm="ring")))
    cost = _network_cost()
    switch = electrical.dimensions[1]
    needed = wrht_wavelengths(wrht_group_size(out.size, out.optical.wavelengths))
    # equal cost: the switch's $ per NPU spread over the wavelengths WRHT needs
    lean = replace(out, optical=replace(out.optical, wavelengths=needed))
    gbps = cost.per_gbps_of(switch) * switch.bandwidth_gbps / cost.per_gbps_of(lean)
    equal = replace(optical, dimensions=(optical.dimensions[0], with_bandwidth(lean, gbps)))
    return {"optical WRHT": optical, "optical ring algorithm": ring_alg,
            f"optical WRHT, switch's cost ({needed} wavelengths x {gbps:.2f} GBps)": equal}


def _network_cost() -> NetworkCost:
    model = load_cost_model()
    if not model.network:
        raise FredError(f"{model.source} has no [network] table")
    return NetworkCost(model.network["npu_cost"], dict(model.network["gbps_cost"]), model.source)


def cluster_table(workloads=WORKLOADS) -> list[dict]:
    electrical = load_cluster("cluster-fred-wafers.toml")
    clusters = {"electrical switch": electrical, **_optical_variants(electrical)}
    cost = _network_cost()
    rows = []
    for name, cluster in clusters.items():
        out = cluster.dimensions[1]
        row = {"scale-out": name, "network_cost_per_npu": cost.per_gbps_of(out) * out.bandwidth_gbps,
               "allreduce_1gb_s": run_collective(cluster, "all-reduce", 1e9, schedule="fixed").time_s}
        for w in workloads:
            r = simulate_cluster_iteration(cluster, get_workload(w), schedule="fixed")
            row[w] = (r.time_s, r.cross_wafer.time_s if r.cross_wafer else 0.0)
        rows.append(row)
    return rows


def optimizer_table(workloads=WORKLOADS, budget_gbps: float = 150.0, budget_cost: float = 20000.0) -> list[dict]:
    cluster = load_cluster("cluster-fred-wafers-3d.toml")
    cost = _network_cost()
    rows = []
    for w in workloads:
        for schedule in ("fixed", "themis"):
            fn = workload_time_function(cluster, [(get_workload(w), 1.0)], schedule=schedule)
            for objective, unit, budget in (("time", "gbps", budget_gbps), ("perf-per-cost", "cost", budget_cost)):
                opt = optimize_bandwidth(cluster, fn, budget=budget, unit=unit, objective=objective, cost=cost)
                t_opt = fn.times(opt.bandwidths)[w]
                t_file = fn.times({"rack": 100.0, "spine": 50.0})[w]
                rows.append({"workload": w, "schedule": schedule, "objective": objective,
                             "budget": f"{budget:g} {'GBps' if unit == 'gbps' else '$'}/NPU",
                             "rack": opt.bandwidths["rack"], "spine": opt.bandwidths["spine"],
                             "grid_rack": opt.grid_best["bandwidths"]["rack"],
                             "grid_spine": opt.grid_best["bandwidths"]["spine"],
                             "objective_value": opt.objective, "grid_objective": opt.grid_best["objective"],
                             "time_s": t_opt, "file_time_s": t_file,
                             "network_cost": opt.cost - cost.npu_cost if opt.cost else None})
    return rows


def _md(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


#: Dai et al., "Performance Comparison of Distributed DNN Training on Optical versus Electrical
#: Interconnect Systems" (ICA3PP 2023), abstract: in 1,024-node systems ring beats recursive
#: doubling above 64 MB (optical) and 1,024 MB (electrical). Their parameters (wavelengths,
#: rates, latencies) are not in the abstract, the only text reachable here.
PAPER_CROSSOVER_BYTES = {"optical": 64 * 2**20, "electrical": 1024 * 2**20}


def ring_rd_crossover(ring_time, rd_time, lo: float = 1.0, hi: float = 1e13) -> float | None:
    """The message size (bytes) above which ``ring_time(size)`` < ``rd_time(size)``, found by
    bisection on the two timing functions (both linear in the size, so there is at most one);
    None when ring never wins below ``hi`` or already wins at ``lo``."""
    if ring_time(hi) >= rd_time(hi) or ring_time(lo) < rd_time(lo):
        return None
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ring_time(mid) >= rd_time(mid) else (lo, mid)
        if hi / lo < 1 + 1e-12:
            break
    return hi


def crossover_table(nodes: int = 1024, wavelengths=(1, 4, 16, 64, 256, 512), setup=HEADLINE_SETUP) -> list[dict]:
    """Where ring starts to beat recursive doubling on ``nodes`` nodes: on the optical ring of
    ``setup`` with each number of ``wavelengths`` (the model's :func:`allreduce_time`), and on
    the electrical network of ``setup``; with the rounds RD takes and the b x d per step each
    medium would need for the paper's crossovers under the model's formulas (closed form:
    ``S* = b d (2 (n-1) - R) / (R - 2 (n-1)/n)``, R = RD's serialised rounds)."""
    base = setup["optical"]
    rows = []
    for w in wavelengths:
        ring = replace(base, wavelengths=w)
        rounds = plan_allreduce(ring, "recursive-doubling", nodes, 1.0).steps
        s = ring_rd_crossover(lambda x: allreduce_time(ring, "ring", nodes, x),
                              lambda x: allreduce_time(ring, "recursive-doubling", nodes, x))
        rows.append(_crossover_row(f"optical, {w} wavelengths", nodes, rounds, s,
                                   ring.wavelength_gbps * 1e9 * ring.oeo_ns * 1e-9, "optical"))
    gbps, lat = setup["electrical_gbps"], setup["electrical_latency_ns"]
    s = ring_rd_crossover(lambda x: _electrical("ring", nodes, x, gbps, lat),
                          lambda x: _electrical("recursive-doubling", nodes, x, gbps, lat))
    rows.append(_crossover_row("electrical", nodes, nodes.bit_length() - 1, s, gbps * lat, "electrical"))
    return rows


def _crossover_row(medium: str, nodes: int, rounds: int, crossover, bd: float, paper_key: str) -> dict:
    factor = (2 * (nodes - 1) - rounds) / (rounds - 2 * (nodes - 1) / nodes) if rounds > 2 * (nodes - 1) / nodes else None
    return {"medium": medium, "rd_rounds": rounds, "bd_bytes": bd, "crossover_bytes": crossover,
            "closed_form_bytes": None if factor is None else bd * factor,
            "paper_bytes": PAPER_CROSSOVER_BYTES[paper_key],
            "bd_for_paper_bytes": None if not factor else PAPER_CROSSOVER_BYTES[paper_key] / factor}


def render() -> str:
    """Every table as Markdown (``fred cluster --optical-study``)."""
    out = ["### WRHT's formulas: group size, steps, wavelengths, longest path\n",
           _md(["nodes", "wavelengths W", "group m", "levels L", "steps 2L", "wavelengths needed", "longest path (hops)"],
               [[r["nodes"], r["wavelengths"], r["group"], r["levels"], r["steps"], r["wavelengths_needed"],
                 r["longest_hops"]] for r in wrht_formula_table()])]
    s = HEADLINE_SETUP
    out.append(f"\n### All-reduce on {s['nodes']} nodes: WRHT against ring and recursive doubling (assumed setup)\n")
    out.append(_md(["size (MB)", "WRHT (ms)", "optical ring (ms)", "optical RD (ms)", "electrical ring (ms)",
                    "electrical RD (ms)", "WRHT vs optical ring", "vs optical RD", "vs electrical ring",
                    "vs electrical RD"],
                   [[f"{r['size'] / 1e6:g}", f"{r['wrht_s'] * 1e3:.3f}", f"{r['optical_ring_s'] * 1e3:.3f}",
                     f"{r['optical_rd_s'] * 1e3:.3f}", f"{r['electrical_ring_s'] * 1e3:.3f}",
                     f"{r['electrical_rd_s'] * 1e3:.3f}"] + [f"{100 * r[k]:+.1f} %" for k in
                                                            ("vs_optical_ring", "vs_optical_rd", "vs_electrical_ring",
                                                             "vs_electrical_rd")]
                    for r in headline_table()]))
    out.append("\n### WRHT's reduction against the optical ring, 1,024 nodes, 64 wavelengths, by x = S / (b d)\n")
    out.append(_md(["x", "WRHT levels", "reduction"],
                   [[f"{r['x']:g}", r["levels"], f"{100 * r['reduction']:+.2f} %"] for r in latency_ratio_table()]))
    out.append("\n### 50 FRED wafers (1,000 NPUs): electrical against optical scale-out (fixed schedule)\n")
    rows = cluster_table()
    out.append(_md(["scale-out", "network $/NPU", "1 GB all-reduce (ms)"] +
                   [f"{w} iteration (cross-wafer) ms" for w in WORKLOADS],
                   [[r["scale-out"], f"{r['network_cost_per_npu']:.0f}", f"{r['allreduce_1gb_s'] * 1e3:.3f}"] +
                    [f"{r[w][0] * 1e3:.2f} ({r[w][1] * 1e3:.2f})" for w in WORKLOADS] for r in rows]))
    out.append("\n### The optimizer's rack / spine split per workload (cluster-fred-wafers-3d.toml)\n")
    out.append(_md(["workload", "schedule", "objective", "budget", "rack GBps", "spine GBps", "grid best rack / spine",
                    "objective (optimum / grid)", "iteration ms (optimum)", "iteration ms (file: 100 / 50)",
                    "network $/NPU"],
                   [[r["workload"], r["schedule"], r["objective"], r["budget"], f"{r['rack']:.2f}", f"{r['spine']:.2f}",
                     f"{r['grid_rack']:.2f} / {r['grid_spine']:.2f}",
                     f"{r['objective_value']:.6g} / {r['grid_objective']:.6g}", f"{r['time_s'] * 1e3:.3f}",
                     f"{r['file_time_s'] * 1e3:.3f}", "" if r["network_cost"] is None else f"{r['network_cost']:.0f}"]
                    for r in optimizer_table()]))
    out.append("\n### Ring against recursive doubling on 1,024 nodes: where ring starts to win (the assumed setup)\n")
    out.append(_md(["network", "RD rounds R", "b x d per step (KB)", "ring wins above (MB)", "closed form (MB)",
                    "paper (MiB)", "b x d the paper's crossover needs (KB)"],
                   [[r["medium"], r["rd_rounds"], f"{r['bd_bytes'] / 1e3:g}",
                     "never" if r["crossover_bytes"] is None else f"{r['crossover_bytes'] / 1e6:.4g}",
                     "-" if r["closed_form_bytes"] is None else f"{r['closed_form_bytes'] / 1e6:.4g}",
                     f"{r['paper_bytes'] / 2**20:g}",
                     "-" if r["bd_for_paper_bytes"] is None else f"{r['bd_for_paper_bytes'] / 1e3:.4g}"]
                    for r in crossover_table()]))
    return "".join(out)
