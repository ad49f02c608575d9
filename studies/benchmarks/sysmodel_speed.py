"""Benchmark of the system model (``fred bench sysmodel``, ``make bench-sysmodel``): time per
collective evaluation, 1,000 concurrent-group evaluations, the whole ``fred eval`` run and the
training-iteration evaluations per second of a sweep (the speed targets: ``fred
eval`` <= 10 s, >= 100 evaluations/s for Transformer-17B on Fred-D). Prints figures only (wall
clock and this process's CPU time: on a shared machine the CPU time is the steadier figure);
``reference=True`` also times the unoptimised path."""

from __future__ import annotations

import argparse
import random
import time

from sysmodel.model_cache import current
from sysmodel.collectives import Collective, evaluate
from sysmodel.platform import FABRICS, default_platform


def bench_collectives(repeat: int) -> None:
    platform = default_platform()
    wafer = tuple(range(platform.npus))
    for fabric in FABRICS:
        evaluate(platform, fabric, [Collective("all-reduce", wafer, 1e9)])  # warm caches
        start = time.perf_counter()
        for _ in range(repeat):
            current().collectives.clear()  # measure the model, not the result cache
            current().rate_free_traffic.clear()   # nor a traffic kept for other link rates
            evaluate(platform, fabric, [Collective("all-reduce", wafer, 1e9)])
        per = (time.perf_counter() - start) / repeat
        print(f"collective  {fabric:7s} wafer all-reduce         {per * 1e3:8.3f} ms per evaluation")
    rng = random.Random(1)
    sets = []
    for _ in range(1000):
        ranks = list(range(platform.npus))
        rng.shuffle(ranks)
        k = rng.choice([2, 4, 5])
        sets.append([Collective("all-reduce", tuple(ranks[i:i + k]), 1e8)
                     for i in range(0, platform.npus - k + 1, k)])
    for fabric in FABRICS:
        current().collectives.clear()
        current().rate_free_traffic.clear()
        start = time.perf_counter()
        for groups in sets:
            evaluate(platform, fabric, groups)
        total = time.perf_counter() - start
        print(f"concurrent  {fabric:7s} 1000 random group sets     {total:8.3f} s "
              f"({total:.3f} ms per set)")


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def _sweep_point_evaluated(spec: dict) -> dict:
    """:func:`studies.points.sweep_point` with the worker's kept iterations dropped first, so
    that a repeated sweep evaluates its iterations again rather than looking them up."""
    from studies.points import sweep_point
    current().iterations.clear()
    return sweep_point(spec)


def bench_eval(reference: bool) -> None:
    from studies.evaluation import run_evaluation, sweep
    from sysmodel.training import simulate_iteration
    from sysmodel.workload_file import get_workload
    from hdl.contracts.placement import factorisations
    from studies.evaluation import sweep_microbatches
    # in this one process (no background sweeps), so that its CPU time is the whole run's
    _, wall, cpu = _timed(lambda: run_evaluation(output=None, progress=False, background=False))
    print(f"fred eval   whole run (no files)              {wall:8.3f} s wall, {cpu:.3f} s CPU")
    platform = default_platform()
    sweep("transformer-17b", "fred-d", platform, progress=False)   # warm the shared caches
    best = None
    for _ in range(3):
        # the iterations themselves evaluated again: a sweep keeps each one per platform value
        # (studies.evaluation.strategy_row), so without this a repeat would only look them up
        current().iterations.clear()
        rows, wall, cpu = _timed(lambda: sweep("transformer-17b", "fred-d", platform, progress=False))
        best = min(best or (wall, cpu), (wall, cpu))
    wall, cpu = best
    print(f"fred sweep  transformer-17b fred-d            {wall:8.3f} s wall, {cpu:.3f} s CPU: "
          f"{len(rows) / wall:.0f} iteration evaluations/s wall ({len(rows) / cpu:.0f}/s CPU), "
          f"{wall / len(rows) * 1e3:.1f} ms each, {len(rows)} strategies (best of 3)")
    # the same sweep's points in a pool of 2 processes (fred sweep --jobs 2), pool warmed first
    from concurrent.futures import ProcessPoolExecutor
    from studies.points import platform_ref, sweep_point, sweep_specs
    specs = sweep_specs("transformer-17b", "fred-d", platform_ref(), samples_per_dp=40, overlap=True)
    with ProcessPoolExecutor(max_workers=2) as pool:
        list(pool.map(sweep_point, specs))
        best = None
        for _ in range(3):
            _, wall, _ = _timed(lambda: list(pool.map(_sweep_point_evaluated, specs)))
            best = min(best or wall, wall)
    print(f"fred sweep  the same, 2 processes (--jobs 2)    {best:8.3f} s wall: "
          f"{len(specs) / best:.0f} iteration evaluations/s")
    if reference:
        base = get_workload("transformer-17b")

        def slow():
            for s in factorisations(platform.npus):
                m = sweep_microbatches(base.microbatches, s.pp, 40)
                try:
                    simulate_iteration(platform, "fred-d", base.with_(microbatches=m), s,
                                       samples_per_dp=40, reference=True)
                except Exception:   # noqa: BLE001 -- strategies that do not fit
                    pass
        _, wall, cpu = _timed(slow)
        print(f"reference   the same sweep, unoptimised path  {wall:8.3f} s wall, {cpu:.3f} s CPU "
              f"({len(rows) / wall:.0f}/s)")


def run(repeat: int = 50, *, end_to_end: bool = True, reference: bool = False,
        iterations: bool = True, commands: bool = True, min_seconds: float = 1.0,
        clusters: bool = True) -> None:
    """Print the figures: with ``iterations`` the iteration evaluations per second of the
    presets and the Megatron-style runs beside the reference path's
    (:mod:`studies.benchmarks.iteration_speed`, each timed for ``min_seconds`` of CPU), and the
    presets evaluated on another network each time, graphs built against templated; with
    ``commands`` the whole commands' wall times; collective evaluations timed ``repeat`` times
    each; with ``clusters`` the cluster iterations' CPU time, cold and warm
    (:mod:`studies.benchmarks.cluster_speed`); with ``end_to_end`` the whole evaluation and the sweep's rate in this process; with
    ``reference`` also the sweep on the unoptimised reference path."""
    import os
    print(f"system-model speed; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores "
          f"(figures from a shared machine vary with the other jobs)")
    from studies.benchmarks.iteration_speed import bench_commands, bench_iterations, bench_networks
    if iterations:
        bench_iterations(min_seconds)
        bench_networks(min_seconds)
    if clusters:
        from studies.benchmarks.cluster_speed import bench_cluster_iterations
        bench_cluster_iterations(min_seconds)
    if commands:
        bench_commands()
    bench_collectives(repeat)
    if end_to_end:
        bench_eval(reference)
