"""Iteration evaluations per second, fast path and reference side by side, and the whole
commands' times (``make bench-sysmodel``; docs/sysmodel.md, Speed).

Cases: the four presets on Fred-D with their default strategies (the paper's platform), and two
Megatron-style runs on the GPU-cluster platform of ``fred validate`` (GPT-3 175B, full
recomputation, interleave 3, one sample per microbatch): 1,024 GPUs as MP8-DP16-PP8 (global
batch 1,536) and 10,240 GPUs as MP8-DP80-PP16 (global batch 2,560). Each evaluation builds and
runs the iteration's graph anew (the graph templates are cleared; networks and collective
results stay cached, as in a sweep, which evaluates many strategies on one platform). Rates are
per process, one core: CPU time is the steadier figure on a shared machine.

:func:`bench_networks` times what a design search or a bandwidth optimizer does: the same
iteration on another network at every evaluation (the NPU link rate changed each time, so no
network, collective result or graph of an earlier evaluation is the same), once with the graph
templates cleared each time (built anew) and once with them kept (the graph of the first
network copied onto the new one, :mod:`sysmodel.graph_template`), alternating, in one run.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import time

from sysmodel import graph_template
from sysmodel.training import simulate_iteration

__all__ = ["iteration_cases", "bench_iterations", "bench_networks", "bench_commands", "COMMANDS"]

PRESETS = ("resnet-152", "transformer-17b", "gpt-3", "transformer-1t")

#: Megatron-style runs: (label, GPUs, pipeline stages, global batch)
MEGATRON_RUNS = (("megatron gpt3-175b 1,024 GPUs", 1024, 8, 1536),
                 ("megatron gpt3-175b 10,240 GPUs", 10240, 16, 2560))


def iteration_cases() -> list:
    """(label, platform, fabric, workload, keyword arguments) of every case above."""
    from studies.validation import FABRIC, case_workload, cluster_platform, load_cases
    from sysmodel.platform import default_platform
    from sysmodel.workload_file import get_workload
    paper = default_platform()
    cases = [(f"{name} fred-d", paper, "fred-d", get_workload(name), {}) for name in PRESETS]
    gpt3 = next(c for c in load_cases()[0] if c.name == "gpt3-175b/full")
    cluster = cluster_platform()
    for label, gpus, pp, batch in MEGATRON_RUNS:
        case = dataclasses.replace(gpt3, gpus=gpus, pipeline_parallel=pp, global_batch=batch)
        wl = case_workload(case)
        cases.append((label, cluster.scaled(npus=gpus), FABRIC, wl,
                      {"microbatches": wl.microbatches}))
    return cases


def _rate(run, min_seconds: float) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds) per call of ``run``, called until ``min_seconds`` of CPU
    time (at least once), and the calls made."""
    calls, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
    while True:
        run()
        calls += 1
        cpu = time.process_time() - cpu0
        if cpu >= min_seconds:
            return cpu / calls, (time.perf_counter() - wall0) / calls, calls


def bench_iterations(min_seconds: float = 1.0, *, reference: bool = True) -> None:
    """Print each case's evaluations per second (fast path; with ``reference`` the reference
    path too, and the ratio); the first, cold evaluation (networks built) is stated apart, and
    before the cases the compiled engine's loading (or compilation, on a fresh clone)."""
    start = time.perf_counter()
    import sysmodel.engine_compiled  # noqa: F401  (numba and the module: timed apart)
    imported = time.perf_counter() - start
    from sysmodel.compiled_code import warm_up_all
    for what, seconds, compiled in warm_up_all():
        how = f"{'compiled (no cached copy)' if compiled else 'loaded from the cache'} in {seconds:.2f} s"
        if what == "engine":
            print(f"compiled engine: numba and the module imported in {imported:.2f} s, the loop {how}",
                  flush=True)
        else:
            print(f"compiled {what}: {how}", flush=True)
    print(f"{'iteration':34s} {'tasks':>7s} {'cold s':>8s} {'ms/eval':>9s} {'eval/s':>8s}"
          f" {'ref ms/eval':>12s} {'ref eval/s':>10s} {'speed-up':>8s}")
    for label, platform, fabric, workload, kwargs in iteration_cases():
        def fast():
            graph_template.clear()
            return simulate_iteration(platform, fabric, workload, **kwargs)
        start = time.perf_counter()
        result = fast()
        cold = time.perf_counter() - start
        cpu, _, _ = _rate(fast, min_seconds)
        line = f"{label:34s} {result.tasks:7d} {cold:8.3f} {cpu * 1e3:9.2f} {1 / cpu:8.1f}"
        if reference:
            ref_cpu, _, _ = _rate(lambda: simulate_iteration(platform, fabric, workload,
                                                             reference=True, **kwargs), min_seconds)
            line += f" {ref_cpu * 1e3:12.2f} {1 / ref_cpu:10.2f} {ref_cpu / cpu:7.1f}x"
        print(line, flush=True)


def bench_networks(min_seconds: float = 1.0, rounds: int = 2) -> None:
    """Per preset of :data:`PRESETS` on Fred-D, CPU time per evaluation when every evaluation is
    on another network (the NPU send rate scaled by 1 + 1e-6 x its count: new link rates, so
    new networks and collective results each time), graph templates cleared each time against
    kept; ``rounds`` alternating rounds, the best of each."""
    from sysmodel.platform import default_platform
    from sysmodel.workload_file import get_workload
    paper = default_platform()
    count = [0]

    def on_new_network(workload, keep: bool):
        count[0] += 1
        platform = dataclasses.replace(paper, npu_send_gbps=paper.npu_send_gbps * (1 + 1e-6 * count[0]))
        if not keep:
            graph_template.clear()
        return simulate_iteration(platform, "fred-d", workload)

    print("iterations on another network each evaluation (NPU link rate changed every time; no "
          "network, collective result or graph reused from an earlier one but through the templates)")
    print(f"{'iteration':34s} {'built ms':>9s} {'templated ms':>13s} {'speed-up':>8s}")
    for name in PRESETS:
        workload = get_workload(name)
        best = {False: float("inf"), True: float("inf")}
        for _ in range(rounds):
            for keep in (False, True):
                on_new_network(workload, keep)   # the template of this round's first network
                best[keep] = min(best[keep], _rate(lambda: on_new_network(workload, keep), min_seconds)[0])
        print(f"{name + ' fred-d':34s} {best[False] * 1e3:9.2f} {best[True] * 1e3:13.2f}"
              f" {best[False] / best[True]:7.2f}x", flush=True)


#: The whole commands timed (``make eval`` runs the first with ``--output results``).
COMMANDS = (("make eval (fred eval --calibration paper)", ["eval", "--calibration", "paper", "--output", "{tmp}"]),
            ("fred sweep transformer-17b fred-d", ["sweep", "--workload", "transformer-17b", "--fabric", "fred-d"]),
            *((f"fred dse {w} default grid --jobs 2", ["dse", "--workload", w, "--jobs", "2", "--no-files"])
              for w in ("transformer-17b", "gpt-3", "transformer-1t")),
            ("fred validate", ["validate"]),
            ("fred --help", ["--help"]))


def bench_commands() -> None:
    """Wall time of each whole command in a fresh process (start-up and imports included, the
    compiled engine loaded from its cache: it is compiled here first if it has none, and that
    stated, so that no command pays the one-time compilation)."""
    from sysmodel.compiled_code import warm_up_all
    for what, seconds, compiled in warm_up_all():
        if compiled:
            print(f"compiled {what}: no cached copy; compiled before the commands in {seconds:.2f} s",
                  flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for label, argv in COMMANDS:
            argv = [a.format(tmp=os.path.join(tmp, "results")) for a in argv]
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "fred", *argv], capture_output=True, text=True)
            wall = time.perf_counter() - start
            status = "" if done.returncode == 0 else f"  (exit {done.returncode}: {done.stderr.strip()[-200:]})"
            print(f"command     {label:48s} {wall:8.2f} s wall{status}", flush=True)
