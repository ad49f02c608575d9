"""The cluster forms of ``fred sweep``, ``fred dse`` and ``fred eval`` (docs/cluster.md, "The
other commands on a cluster"): the same rows, rankings and files as on one wafer, each point
being a :func:`sysmodel.cluster_training.simulate_cluster_iteration` instead of a wafer
iteration.

* :func:`cluster_strategy_row`: one in-wafer strategy as a row with the fields of
  :class:`studies.evaluation.SweepRow` (so the sweep's ranking, the DSE's summary and their
  CSV/JSON writers are the wafer's own). The cross-wafer gradient all-reduce is DP
  communication: it is added to ``dp_s`` and ``exposed_comm_s``; what a pipeline across
  wafers adds to its slowest wafer (bubble and exposed transfers) is added to ``bubble_s``;
  ``notes`` say how much of each.
* :func:`cluster_spec` / :func:`cluster_from_spec`: a cluster as plain data for the point
  runners (process pools, the point cache): the file, the characterization, the compute scale,
  the chunk schedule, the chunks and the mapping.
* :func:`cluster_evaluation`: the four paper workloads on the cluster with its wafers' fabric
  set to the mesh and to each Fred variant, both chunk schedules: iteration times, FRED's
  speedup over mesh wafers, exposed communication per dimension.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

from hdl.contracts.errors import FredError
from studies.evaluation import FRED_FABRICS, sweep_microbatches
from sysmodel.cluster_training import resolve_mapping, simulate_cluster_iteration
from sysmodel.dimensions import Cluster, load_cluster, resolve_cluster_path, with_wafer
from sysmodel.multidim_collectives import SCHEDULES
from sysmodel.workloads import Workload

__all__ = ["cluster_spec", "cluster_from_spec", "cluster_strategy_row", "ClusterEvalRow",
           "cluster_evaluation", "CLUSTER_EVAL_FIELDS", "cluster_dse_specs", "cluster_dse_row"]


def cluster_spec(path: str, *, characterization=None, compute_scale: float = 1.0, fabric=None,
                 schedule: str = "themis", chunks: int = 64, mapping: dict | None = None) -> dict:
    """Plain data naming a cluster and how its points run (paths absolute: a worker may run
    in another directory)."""
    return {"path": str(resolve_cluster_path(path).resolve()),
            "characterization": None if characterization is None else str(Path(characterization).resolve()),
            "compute_scale": float(compute_scale), "fabric": fabric, "schedule": schedule,
            "chunks": int(chunks), "mapping": dict(mapping or {})}


def cluster_from_spec(spec: dict) -> Cluster:
    """The cluster :func:`cluster_spec` names, its wafers' compute scaled and fabric set."""
    cluster = load_cluster(spec["path"], characterization=spec["characterization"])
    first = cluster.dimensions[0]
    if spec["compute_scale"] != 1.0 or spec["fabric"] is not None:
        wafer = first.wafer.with_compute_scale(spec["compute_scale"]) if first.wafer else None
        cluster = with_wafer(cluster, wafer, spec["fabric"])
    return cluster


def cluster_strategy_row(cluster: Cluster, base: Workload, strategy, samples_per_dp: int, *,
                         overlap: bool = True, schedule: str = "themis", chunks: int = 64,
                         mapping: dict | None = None) -> dict:
    """One strategy of ``base`` on ``cluster`` as a sweep row (module docstring). Microbatches:
    as the wafer sweep's (``studies.evaluation.sweep_microbatches``), with the pipeline
    counted across wafers too (in-wafer PP x the PP dimensions' sizes); a strategy that does
    not fit is a row with ``feasible`` false and the reason in ``notes``."""
    start = time.perf_counter()
    try:
        pp_dims, _ = resolve_mapping(cluster, mapping)
        across = math.prod(d.size for d in pp_dims)
        m = sweep_microbatches(base.microbatches, strategy.pp * across, samples_per_dp)
        r = simulate_cluster_iteration(cluster, base.with_(microbatches=m), strategy, schedule=schedule,
                                       chunks=chunks, samples_per_dp=samples_per_dp, overlap=overlap,
                                       mapping=mapping)
        cross = r.cross_wafer.time_s if r.cross_wafer else 0.0
        added = r.pipeline_s - r.wafer.time_s
        parts = {f"{k}_s": v for k, v in r.wafer.breakdown.items()}
        parts["dp_s"] = parts.get("dp_s", 0.0) + cross
        parts["bubble_s"] = parts.get("bubble_s", 0.0) + added
        notes = [f"cross-wafer DP all-reduce {cross * 1e3:.4g} ms ({schedule})"]
        if r.pp_across > 1:
            notes.append(f"pipeline across {r.pp_across} wafers adds {added * 1e3:.4g} ms")
        row = {"strategy": str(strategy), "time_s": r.time_s, "feasible": True,
               "time_per_sample_s": r.time_per_sample_s, "microbatches": r.wafer.microbatches, **parts,
               "exposed_comm_s": sum(r.wafer.breakdown[k] for k in ("mp", "pp", "io", "dp")) + cross,
               "notes": "; ".join(notes + list(r.wafer.notes))}
    except FredError as exc:
        row = {"strategy": str(strategy), "time_s": math.inf, "time_per_sample_s": math.inf,
               "feasible": False, "notes": str(exc)}
    row["eval_s"] = time.perf_counter() - start
    return row


@dataclass(frozen=True)
class ClusterEvalRow:
    """One workload on the cluster with one wafer fabric and one chunk schedule."""

    workload: str
    fabric: str
    schedule: str
    strategy: str
    time_s: float
    wafer_time_s: float
    cross_wafer_s: float
    time_per_sample_s: float
    speedup_over_mesh: float
    exposed_by_dimension: dict


#: the columns of ``cluster_iterations.csv`` (the exposed time per dimension follows, one
#: column per dimension, ``exposed_<name>_s``)
CLUSTER_EVAL_FIELDS = ("workload", "fabric", "schedule", "strategy", "time_s", "wafer_time_s",
                       "cross_wafer_s", "time_per_sample_s", "speedup_over_mesh")


def cluster_evaluation(cluster: Cluster, workloads, *, schedules=SCHEDULES, chunks: int = 64,
                       mapping: dict | None = None, overlap: bool = True,
                       samples_per_dp: int | None = None) -> tuple[list[ClusterEvalRow], dict]:
    """Every workload (each with its own in-wafer strategy) on ``cluster`` with its wafers'
    fabric set to the mesh and to every Fred variant the wafer platform defines, under each
    chunk schedule; ``speedup_over_mesh`` = the mesh wafers' time / this one (same schedule).
    Returns the rows and, per workload that does not map (e.g. a weight-streaming workload
    with PP across wafers, or one that does not fit the memory), the reason."""
    wafer = cluster.dimensions[0].wafer
    if wafer is None:
        raise FredError(f"cluster {cluster.name!r}: its first dimension is not a wafer; fred eval "
                        f"compares wafer fabrics")
    fabrics = [f for f in ("mesh", *FRED_FABRICS) if f in wafer.fabrics]
    if "mesh" not in fabrics:
        raise FredError(f"cluster {cluster.name!r}: its wafer {wafer.name!r} defines no mesh to compare with")
    rows, skipped = [], {}
    for workload in workloads:
        try:
            rows += _workload_rows(cluster, workload, fabrics, schedules, chunks=chunks, mapping=mapping,
                                   overlap=overlap, samples_per_dp=samples_per_dp)
        except FredError as exc:
            skipped[workload.name] = str(exc)
    return rows, skipped


def _workload_rows(cluster: Cluster, workload, fabrics, schedules, **options) -> list[ClusterEvalRow]:
    rows = []
    for schedule in schedules:
        results = {f: simulate_cluster_iteration(with_wafer(cluster, fabric=f), workload, schedule=schedule,
                                                 **options) for f in fabrics}
        mesh = results["mesh"].time_s
        rows += [ClusterEvalRow(workload.name, f, schedule, r.strategy, r.time_s, r.wafer.time_s,
                                r.cross_wafer.time_s if r.cross_wafer else 0.0, r.time_per_sample_s,
                                mesh / r.time_s, dict(r.exposed_by_dimension))
                 for f, r in results.items()]
    return rows


def cluster_dse_specs(workload: str, spec: dict, designs, *, samples_per_dp: int, overlap: bool,
                      strategies=None) -> list[dict]:
    """``fred dse`` on a cluster: one point spec per (design, in-wafer strategy), as
    :func:`studies.dse.dse_specs` makes for a wafer, naming the cluster (``"cluster"``: a
    :func:`cluster_spec`) whose wafers take the design (:func:`studies.dse.dse_point`)."""
    from hdl.contracts.placement import factorisations, parse_strategy
    from studies.points import workload_ref
    from sysmodel.workload_file import get_workload
    wafer = cluster_from_spec(spec).dimensions[0]
    get_workload(workload)
    chosen = factorisations(wafer.size) if strategies is None else [parse_strategy(s) for s in strategies]
    for strategy in chosen:                  # one line now rather than every point failing later
        if strategy.npus > wafer.size:
            raise FredError(f"strategy {strategy} needs {strategy.npus} NPUs; the wafer dimension "
                            f"{wafer.name!r} has {wafer.size}")
    return [{"kind": "dse", "workload": workload_ref(workload), "design": d.to_dict(), "strategy": str(s),
             "samples_per_dp": samples_per_dp, "overlap": overlap, "platform": None, "cluster": spec}
            for d in designs for s in chosen]


def cluster_dse_row(spec: dict, design_platform, fabric: str, workload, strategy) -> dict:
    """The row of one cluster DSE point: the cluster with ``design_platform`` (fabric
    ``fabric``) as its wafers, :func:`cluster_strategy_row`."""
    c = spec["cluster"]
    cluster = with_wafer(cluster_from_spec(c), design_platform, fabric)
    return cluster_strategy_row(cluster, workload, strategy, spec["samples_per_dp"], overlap=spec["overlap"],
                                schedule=c["schedule"], chunks=c["chunks"], mapping=c["mapping"])
