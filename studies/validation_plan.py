"""The Verilated builds of a ``fred fabric-validate`` run, named before anything is generated
or built: each case's builds (:func:`case_builds`), the distinct ones and what each case
simulates (``--plan``, :func:`plan_rows`), and the distinct builds made ahead of the runs,
``jobs`` at once (``--jobs``, :func:`build_ahead`).

Why: on a fresh clone a block's wall time is its cold builds (a packet fabric's Verilog is
17-21 MB: minutes of verilating on one core, then minutes of C++ on both), not its
simulations (docs/fabric_validation.md, "What `make fabric-validate` costs"). The runs load
their requests, programs and data through the tops' ports, so one build serves every case on
the same hardware; verilating is single-threaded, so two builds at once use the second core
while the other verilates. A build made ahead is the very folder the run would make (the
same build function and options, cached by the hash of the Verilog): the cycles cannot move.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

__all__ = ["PlannedBuild", "case_builds", "distinct_builds", "plan_rows", "build_ahead"]


@dataclass(frozen=True)
class PlannedBuild:
    """One Verilated build a case needs: ``key`` (equal keys: one build), ``what`` (one line
    for the plan) and ``make`` (builds it, or finds it in the cache; None where the case's own
    runner builds it: the mesh's I/O tops, built when run)."""

    key: tuple
    what: str
    make: Callable | None = None


def case_builds(case, *, switch: str, seed: int = 0, backpressure: float = 0.0,
                simulator: str | None = None) -> list[PlannedBuild]:
    """The builds ``case`` runs on (in run order, repeats kept), as ``fred fabric-validate``
    runs it on ``switch`` with ``seed`` and the NPU sinks' ``backpressure``; ``simulator``:
    the circuit fabric's (None: the runner's default). A case of
    :mod:`studies.fabric_case` (circuit or packet), :mod:`studies.concurrent_case`,
    :mod:`studies.mesh_case` or a striped I/O case (:class:`studies.mesh_validation.StripeIoCase`)."""
    from studies.concurrent_case import ConcurrentCase
    from studies.mesh_case import MeshCase
    from studies.mesh_validation import StripeIoCase
    if isinstance(case, ConcurrentCase):
        from studies.concurrent_case import concurrent_runs
        runs, _ = concurrent_runs(case, seed=seed, sink_backpressure=backpressure)
        return [_packet(case.spec, request, keywords) for request, keywords in runs]
    if isinstance(case, MeshCase):
        return [_mesh(case)]
    if isinstance(case, StripeIoCase):
        key = case.top_key()
        return [PlannedBuild(("striped I/O",) + key, f"striped I/O top of {case.fabric}, {key[0]} "
                             f"({key[2]} controllers{', ' + key[3] if key[0] == 'shared' else ''})",
                             case.build)]
    if switch == "packet":
        return [_packet(case.spec, case.request, dict(algorithm=case.estimate.algorithm, seed=seed,
                                                      sink_backpressure=backpressure))]
    return [_circuit(case.spec, simulator)]


def _packet(spec, request, keywords: dict) -> PlannedBuild:
    from cocotb_tests.fabric.packet_fabric_sim import build_packet_fabric, packet_build
    keywords = {k: v for k, v in keywords.items() if k not in ("vcs", "delays", "watchdog_cycles")}
    build, _ = packet_build(spec, request, **keywords)
    return PlannedBuild(("packet",) + build.key(), f"packet fabric: {build.describe()}",
                        functools.partial(build_packet_fabric, build))


def _circuit(spec, simulator: str | None) -> PlannedBuild:
    from cocotb_tests.fabric.run import DEFAULT_SIMULATOR, build_fabric, build_options, hardware_key
    simulator = simulator or DEFAULT_SIMULATOR
    cflags, pgo = build_options(spec)
    return PlannedBuild(("circuit", hardware_key(spec), simulator),
                        f"circuit fabric: Fred_{spec.middle} switch ports "
                        f"{'/'.join(map(str, spec.switch_ports))}, {spec.dtype}, {simulator}, {cflags}"
                        + (" PGO" if pgo else ""),
                        functools.partial(build_fabric, spec, simulator=simulator))


def _mesh(case) -> PlannedBuild:
    if case.io is not None:
        return PlannedBuild(("mesh I/O", case.io, case.io_op),
                            f"mesh {case.io_op} top ({case.io.controllers} controllers; built when run)")
    from cocotb_tests.fabric.mesh_run import build_mesh
    return PlannedBuild(("mesh", case.spec), f"mesh {case.spec.cols} x {case.spec.rows}, "
                        f"{case.spec.dtype}, cocotb", functools.partial(build_mesh, case.spec))


def distinct_builds(builds_per_case) -> list[PlannedBuild]:
    """The distinct builds of ``builds_per_case`` (one list per case), in first-use order."""
    out: dict = {}
    for builds in builds_per_case:
        for build in builds:
            out.setdefault(build.key, build)
    return list(out.values())


def plan_rows(labels, builds_per_case) -> tuple[list[list], list[list]]:
    """``(case rows, build rows)`` of a plan: per case its label (``labels``), its runs and
    the numbers of its builds (1-based, in :func:`distinct_builds` order); per build its
    number, the cases using it and what it is."""
    builds = distinct_builds(builds_per_case)
    number = {b.key: i + 1 for i, b in enumerate(builds)}
    cases = [[label, len(bs), ", ".join(dict.fromkeys(str(number[b.key]) for b in bs))]
             for label, bs in zip(labels, builds_per_case)]
    users = {b.key: sum(any(x.key == b.key for x in bs) for bs in builds_per_case) for b in builds}
    return cases, [[number[b.key], users[b.key], b.what] for b in builds]


def build_ahead(builds_per_case, jobs: int, *, announce=print) -> int:
    """Make the distinct builds of ``builds_per_case`` that have a ``make``, ``jobs`` at a
    time (threads: each build is a Verilator and a make process; a build folder is locked
    while it is made, ``eda.toolchain.build_lock``); returns how many. A failed build raises
    its error (after the builds already started have ended). ``jobs`` 1: nothing is made
    ahead (each run builds its own, as before)."""
    from hdl.contracts.errors import FredError
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise FredError(f"--jobs must be a whole number >= 1, got {jobs!r}")
    todo = [b for b in distinct_builds(builds_per_case) if b.make is not None]
    if jobs == 1 or not todo:
        return 0
    announce(f"building {len(todo)} Verilated model(s) ahead, {jobs} at a time")
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(b.make) for b in todo]:
            future.result()
    return len(todo)
