"""Run weight streaming (``io-load``) on the RTL mesh with I/O controllers and judge it
(docs/mesh_rtl.md, "I/O controllers on the mesh").

:func:`run_mesh_io` checks the request (:func:`hdl.compiler.mesh_io_program.io_load_program`)
before building anything, builds ``fred_mesh_io`` (Verilator, only the top's ports public,
cached), runs ``bench_mesh_io`` and checks: every controller sent its stripe, every NPU received
every stripe with no bad flit, no protocol error, done before the watchdog (a stall is an error
naming the NPUs short of their flits).
"""

from __future__ import annotations

from dataclasses import dataclass

from cocotb_tests.fabric.mesh_run import CFLAGS, PORTS
from cocotb_tests.runner import run_bench
from hdl.compiler.mesh_io_program import (IoLoadProgram, IoSpillProgram, IoStoreProgram, io_load_program,
                                          io_spill_program, io_store_program)
from hdl.contracts.errors import FredError
from hdl.contracts.mesh_io import MeshIoSpec

__all__ = ["MeshIoRun", "run_mesh_io", "mesh_io_verilog", "run_mesh_io_store", "judge_store", "run_mesh_io_spill",
           "judge_spill"]

TOP = "fred_mesh_io"
STORE_TOP = "fred_mesh_io_store"
SPILL_TOP = "fred_mesh_io_spill"


@dataclass
class MeshIoRun:
    cycles: int
    errors: list[str]
    sim_s: float
    program: IoLoadProgram | IoStoreProgram | IoSpillProgram

    @property
    def cycles_per_s(self) -> float:
        return self.cycles / self.sim_s if self.sim_s > 0 else 0.0


_VERILOG: dict = {}


def mesh_io_verilog(spec: MeshIoSpec, *, store_max_stripe: int | None = None, spill: bool = False) -> str:
    """The top's Verilog (generated once per spec and process): ``fred_mesh_io``, or with
    ``store_max_stripe`` the io-store top ``fred_mesh_io_store`` of that partial-sum memory, or
    with ``spill`` the checkpoint-spill top ``fred_mesh_io_spill`` (io-write and io-read)."""
    key = (spec, store_max_stripe, spill)
    if key not in _VERILOG:
        from hdl.emit.verilog import to_verilog
        if spill:
            from hdl.designs.mesh.mesh_io_spill_top import MeshIoSpillTop
            _VERILOG[key] = to_verilog(MeshIoSpillTop(spec), name=SPILL_TOP)
        elif store_max_stripe is None:
            from hdl.designs.mesh.mesh_io_top import MeshIoTop
            _VERILOG[key] = to_verilog(MeshIoTop(spec), name=TOP)
        else:
            from hdl.designs.mesh.mesh_io_store_top import MeshIoStoreTop
            _VERILOG[key] = to_verilog(MeshIoStoreTop(spec, max_stripe=store_max_stripe), name=STORE_TOP)
    return _VERILOG[key]


def judge_io(program: IoLoadProgram, after: dict, stalled: bool) -> list[str]:
    """What went wrong in a run's counters (empty: every flit arrived once, in order, intact)."""
    errors = []
    if stalled:
        short = [r for r, n in enumerate(after["npus"]) if n["received"] != program.expect]
        errors.append(f"the fabric did not finish before the watchdog (stall): NPUs {short} short "
                      f"of their {program.expect} flits")
    if after["global"]["protocol_error"]:
        errors.append("a router, controller or forwarding queue broke the credit protocol (overflow)")
    for k, c in enumerate(after["controllers"]):
        if c["sent"] != program.stripe_flits:
            errors.append(f"controller {k}: sent {c['sent']} of {program.stripe_flits}")
    for rank, n in enumerate(after["npus"]):
        if n["received"] != program.expect or n["errors"]:
            errors.append(f"NPU {rank}: received {n['received']} of {program.expect}, {n['errors']} bad "
                          f"flit(s), first bad arrival #{n['first_error']}")
    return errors


def judge_store(program: IoStoreProgram, after: dict, stalled: bool) -> list[str]:
    """What went wrong in an io-store run's counters (empty: every controller received each of
    its trees' flits once, in order, each the sum of every NPU's contribution)."""
    errors = []
    if stalled:
        short = [k for k, c in enumerate(after["controllers"]) if c["received"] != program.expect[k]]
        errors.append(f"the fabric did not finish before the watchdog (stall): controllers {short} short of their flits")
    if after["global"]["protocol_error"]:
        errors.append("a router or a forwarder's send queue broke the credit protocol (overflow)")
    for k, c in enumerate(after["controllers"]):
        if c["received"] != program.expect[k] or c["errors"]:
            errors.append(f"controller {k}: received {c['received']} of {program.expect[k]}, {c['errors']} bad "
                          f"flit(s), first bad arrival #{c['first_error']}")
    busy = [r for r, n in enumerate(after["npus"]) if not n["idle"]]
    if busy:
        errors.append(f"NPUs {busy} still hold partial sums to send")
    for k, want in enumerate(program.expected_hashes):    # fp16: the golden fixed-order sums
        got = (after["controllers"][k]["hash0"], after["controllers"][k]["hash1"])
        if got != tuple(want):
            errors.append(f"controller {k}: fp16 sums hash {got[0]:#010x}/{got[1]:#010x}, the golden "
                          f"order's {want[0]:#010x}/{want[1]:#010x}")
    return errors


def judge_spill(program: IoSpillProgram, after: dict, stalled: bool) -> list[str]:
    """What went wrong in a checkpoint spill's counters (empty: every receiver got each
    sender's stripe once, in order, intact: which NPU, which controller, which flit)."""
    senders, receivers = ("npus", "controllers") if program.op == "io-write" else ("controllers", "npus")
    errors = []
    if stalled:
        short = [i for i, u in enumerate(after[receivers]) if u["received"] != program.expect]
        errors.append(f"the fabric did not finish {program.op} before the watchdog (stall): {receivers} {short} "
                      f"short of their {program.expect} flits")
    if after["global"]["protocol_error"]:
        errors.append("a router, sender or controller sink queue broke the credit protocol (overflow)")
    for i, u in enumerate(after[senders]):
        if u["sent"] != program.sends:
            errors.append(f"{senders[:-1]} {i}: sent {u['sent']} of {program.sends}")
    for i, u in enumerate(after[receivers]):
        if u["received"] != program.expect or u["errors"]:
            errors.append(f"{receivers[:-1]} {i}: received {u['received']} of {program.expect}, {u['errors']} bad "
                          f"flit(s), first bad arrival #{u['first_error']}")
    return errors


def run_mesh_io_spill(spec: MeshIoSpec, stripe_flits: int, op: str, *, stall: float = 0.0,
                      watchdog_cycles: int | None = None, poll: int = 256) -> MeshIoRun:
    """Check, build (cached), run and judge a checkpoint spill (``op`` io-write or io-read) of
    ``stripe_flits`` per NPU and controller; ``stall``: the probability every sender and
    controller sink idles in a cycle. The watchdog defaults to 4 x the controllers' bound (each
    moves one stripe per NPU at ``spec.io_rate``) + 20,000 cycles."""
    from hdl.designs.mesh.mesh_io_spill_top import SPILL_READ
    program = io_spill_program(spec, stripe_flits, op)
    if not 0 <= stall < 1:
        raise FredError(f"stall must be a probability in [0, 1), got {stall!r}")
    if watchdog_cycles is None:
        a, b = spec.io_rate
        watchdog_cycles = int(4 * stripe_flits * spec.mesh.npus * b / a / (1 - stall)) + 20_000
    after, stalled, sim_s = _run(spec, program, stall, watchdog_cycles, poll, mesh_io_verilog(spec, spill=True),
                                 SPILL_TOP, npu_read=list(SPILL_READ), controller_read=list(SPILL_READ))
    return MeshIoRun(after["global"]["cycles"], judge_spill(program, after, stalled), sim_s, program)


def run_mesh_io_store(spec: MeshIoSpec, stripe_flits: int, mode: str = "tree-split", *, max_stripe: int,
                      stall: float = 0.0, watchdog_cycles: int | None = None, poll: int = 256) -> MeshIoRun:
    """Check, build (cached), run and judge a gradient reduce-out of ``stripe_flits`` per
    controller (``max_stripe``: the NPUs' partial-sum memory per tree, a build parameter);
    ``stall``: the probability every NPU's reducer idles in a cycle. fp16 (``spec.mesh.dtype``):
    each controller's tree hashes against the golden model's (``program.expected_hashes``)."""
    from hdl.designs.mesh.mesh_io_store_top import STORE_NPU_READ, store_controller_read
    program = io_store_program(spec, stripe_flits, mode, max_stripe=max_stripe)
    after, stalled, sim_s = _run(spec, program, stall, watchdog_cycles, poll,
                                 mesh_io_verilog(spec, store_max_stripe=max_stripe), STORE_TOP,
                                 npu_read=list(STORE_NPU_READ), controller_read=list(store_controller_read(spec)))
    return MeshIoRun(after["global"]["cycles"], judge_store(program, after, stalled), sim_s, program)


def run_mesh_io(spec: MeshIoSpec, stripe_flits: int, mode: str = "tree-split", *, stall: float = 0.0,
                watchdog_cycles: int | None = None, poll: int = 256) -> MeshIoRun:
    """Check, build (cached), run and judge weight streaming of ``stripe_flits`` per controller;
    ``stall``: the probability every controller and NPU forwarder idles in a cycle."""
    program = io_load_program(spec, stripe_flits, mode)
    after, stalled, sim_s = _run(spec, program, stall, watchdog_cycles, poll, mesh_io_verilog(spec), TOP)
    return MeshIoRun(after["global"]["cycles"], judge_io(program, after, stalled), sim_s, program)


def _run(spec, program, stall, watchdog_cycles, poll, verilog, top, **reads):
    """Build ``top`` (cached) and run ``bench_mesh_io`` on ``program``: ``(after, stalled, sim_s)``."""
    stripe_flits, mode = program.stripe_flits, program.mode
    if not 0 <= stall < 1:
        raise FredError(f"stall must be a probability in [0, 1), got {stall!r}")
    if watchdog_cycles is None:
        a, b = spec.mesh.link_rate
        watchdog_cycles = int(4 * program.hottest * stripe_flits * b / a / (1 - stall)) + 20_000
    params = {"stripe": stripe_flits, "mode": program.mode_index, "stall": round(stall * 65536),
              "npus": spec.mesh.npus,
              "controllers": spec.controllers, "watchdog_cycles": watchdog_cycles, "poll": poll, **reads}
    from eda.fabric.build import build_top_public_only
    build_dir = build_top_public_only(verilog, top, PORTS, cflags=CFLAGS)
    result = run_bench(verilog=(verilog, top), test_module="cocotb_tests.fabric.bench_mesh_io",
                       bench_params=params, prebuilt=build_dir, run_name=f"{top}-{mode}-{stripe_flits}")
    m = result.metrics
    if not m:
        raise FredError(f"the mesh I/O bench recorded nothing; log: {result.test_dir / 'sim.log'}")
    return m["after"], m["stalled"], m["sim_s"]
