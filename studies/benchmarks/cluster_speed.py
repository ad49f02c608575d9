"""Cluster iteration evaluations (``make bench-sysmodel``; docs/cluster.md, Speed): the speed
target "a 1,000-NPU iteration evaluates in under 1 s on one core".

Cases: the four paper workloads (their in-wafer strategy, DP across wafers, Themis) on the
shipped 1,000-NPU clusters of FRED and of mesh wafers, and the Megatron-style GPT-3 175B
(:mod:`studies.megatron_study`: MP20 per wafer, PP over a rack of 10 wafers, DP across racks,
~1,536 samples of one microbatch each; its pipeline's 10 wafers are simulated one by one) at 1,000 and 10,000 NPUs. One process, one core.

Two figures per case, both CPU time (the steadier figure on a shared machine):
* ``cold``: the first evaluation in a fresh model cache (every network, collective, layer time
  and graph built);
* ``warm``: later evaluations with only the whole-iteration memo and the graph templates
  cleared, as in a sweep over strategies or bandwidths on one platform (networks, collective
  results and layer times stay cached).
"""

from __future__ import annotations

import time

from sysmodel import graph_template
from sysmodel.model_cache import ModelCache, current, using

__all__ = ["cluster_cases", "bench_cluster_iterations"]


def cluster_cases() -> list:
    """(label, run) of every case above; ``run()`` evaluates one cluster iteration."""
    from studies.cluster_study import CLUSTERS
    from studies.megatron_study import megatron_clusters, megatron_iteration
    from sysmodel.cluster_training import simulate_cluster_iteration
    from sysmodel.dimensions import load_cluster
    from sysmodel.workload_file import get_workload
    from sysmodel.workloads import WORKLOADS
    cases = []
    for kind, name in CLUSTERS.items():
        for w in WORKLOADS:
            cases.append((f"{w} on 1,000 NPUs, {kind} wafers",
                          lambda name=name, w=w: simulate_cluster_iteration(load_cluster(name), get_workload(w))))
    for npus in (1000, 10000):
        for kind in ("fred", "mesh"):
            cases.append((f"megatron-gpt-175b on {npus:,} NPUs, {kind} wafers",
                          lambda npus=npus, kind=kind: megatron_iteration(megatron_clusters(npus)[kind])))
    return cases


def _cpu(run) -> float:
    start = time.process_time()
    run()
    return time.process_time() - start


def bench_cluster_iterations(min_seconds: float = 1.0) -> None:
    """Print each case's cold and warm CPU time per evaluation."""
    print(f"{'cluster iteration':48s} {'cold s':>8s} {'warm ms':>9s} {'warm eval/s':>11s}")
    worst = 0.0
    for label, run in cluster_cases():
        with using(ModelCache()):
            cold = _cpu(run)
            calls, spent = 0, 0.0
            while spent < min_seconds or calls == 0:
                current().iterations.clear()
                graph_template.clear()
                spent += _cpu(run)
                calls += 1
        worst = max(worst, cold)
        warm = spent / calls
        print(f"{label:48s} {cold:8.3f} {warm * 1e3:9.2f} {1 / warm:11.1f}", flush=True)
    print(f"slowest cold cluster evaluation {worst:.3f} s CPU (target: a 1,000-NPU iteration under 1 s)")
