"""Loading the striped I/O request's weight streaming into a packet fabric built for it
(``PacketFabricTop(online=True, stripes=C, npu=StripeNpu)``, docs/fabric_rtl.md, "Striped I/O:
every controller at once"): the program-port writes of every NPU and controller, and the
judgement of a run from the read registers."""

from __future__ import annotations

from functools import partial

from amaranth.hdl import Elaboratable

from hdl.compiler.io_stripe_program import IoStripeProgram, npu_own, receiver_entries
from hdl.contracts.io_stripes import stripe_npu_writes
from hdl.contracts.npu_engine import STAGE_REGS, engine_writes, mix
from hdl.contracts.packet import VC, PacketFormat, stream_packets
from hdl.designs.fabric.packet_fabric_top import PACKET_ENGINE_READ, PACKET_REGS, STRIPE_REG, PacketFabricTop, claim_interval
from hdl.designs.fabric.stripe_npu import StripeNpu

__all__ = ["stripe_io_top", "stripe_top_key", "stripe_io_writes", "stripe_controller_engine", "controller_last_seq", "judge_stripe_io",
           "run_stripe_io", "run_striped_top", "build_striped_top"]

_MASK = 0xFFFFFFFF


def stripe_io_top(spec, program: IoStripeProgram, *, packet_flits: int = 8, depth: int | None = None) -> PacketFabricTop:
    """The packet fabric of ``spec`` with online routing, a stripe field for ``program``'s
    stripes and a :class:`StripeNpu` at every NPU port, its started stripe (io-reduce) paced to
    the controllers' rate ``spec.io_rate`` and claiming its L1 input after one stripe's fair
    interval (:func:`claim_interval`)."""
    return PacketFabricTop(spec, online=True, packet_flits=packet_flits, depth=depth,
                           stripes=program.controllers,
                           npu=partial(StripeNpu, stripes=program.controllers,
                                       rate=(spec.io_rate.numerator, spec.io_rate.denominator),
                                       claim_after=claim_interval(spec, packet_flits)))


def stripe_top_key(spec, program: IoStripeProgram, *, packet_flits: int = 8, depth: int | None = None) -> tuple:
    """What :func:`stripe_io_top`'s Verilog depends on: the fabric's hardware, the stripes
    (controllers), the packet length and the buffers' depth; not the op nor the size (one top
    streams weights and reduces gradients, the stripes' length is loaded through its ports)."""
    from cocotb_tests.fabric.run import hardware_key
    return ("stripe", hardware_key(spec), program.controllers, packet_flits, depth)


def stripe_controller_engine(step, seed: int) -> dict:
    """The controller's engine: one stage sending its stripe (indices org ..) of its memory
    (io-broadcast), or receiving it and checking the sum of every member's data (io-reduce:
    the step has a source)."""
    stage = {name: 0 for name in STAGE_REGS}
    if step.source is not None:
        stage.update(recv_count=step.flits, wr=step.wr, hr=step.hr, org=step.org, chunk=_MASK)
    else:
        stage.update(send_count=step.flits, own_only=step.flits, ws=step.ws, hs=step.hs, org=step.org,
                     chunk=_MASK)
    return {"backpressure": 0, "seed": (mix(step.endpoint, seed + 3) & 0xFFFF) or 1, "stages": [stage]}


def controller_last_seq(step, packet: PacketFormat) -> int:
    """The number of the last packet a controller receives (its stripe's, io-reduce; 0 when it
    receives none)."""
    return max(0, stream_packets(step.flits, packet.packet_flits) - 1) if step.source is not None else 0


def stripe_io_writes(spec, program: IoStripeProgram, packet: PacketFormat, *, seed: int = 0) -> list[list[int]]:
    """``[unit, register, value]`` program-port writes: every NPU's receiver table, routes and
    header (:func:`~hdl.contracts.io_stripes.stripe_npu_writes`), every controller's engine,
    header registers (default phase index, DP's VC, flow = its entry NPU) and stripe."""
    writes = []
    for r in range(spec.npus):
        routes = {k: s.dest for k, s in program.steps[r].items() if s.dest is not None}
        writes += [[r, reg, value] for reg, value in
                   stripe_npu_writes(receiver_entries(program, r), routes, program.controllers,
                                     phase=packet.online_phase, vc=int(VC.DP), own=npu_own(program, r))]
    for k in range(program.controllers):
        io = spec.npus + k
        step = program.steps[io][k]
        writes += [[io, reg, value] for reg, value in engine_writes(stripe_controller_engine(step, seed))]
        header = {"phase": packet.online_phase, "vc": int(VC.DP), "flow": step.dest or 0,
                  "last_seq": controller_last_seq(step, packet), "delay": 0}
        writes += [[io, PACKET_REGS[name], header[name]] for name in PACKET_REGS]
        writes.append([io, STRIPE_REG, k])
    return writes


def judge_stripe_io(spec, program: IoStripeProgram, reads: dict) -> list[str]:
    """Problems of a run, from ``reads`` = ``{endpoint: {read register: value}}`` (the NPUs'
    :attr:`StripeNpu.read_names`, the controllers' ``PACKET_ENGINE_READ``): an NPU not done,
    with errors, sequence or link errors, or that did not receive the whole size; a controller
    not done or with link errors. Empty: every flit checked at every NPU, nothing lost."""
    problems = []
    for r in range(spec.npus):
        v = reads[r]
        receives = sum(st.flits for st in program.steps[r].values() if st.source is not None)
        if not v["done"] or v["errors"] or v["seq_errors"] or v["link_errors"] or v["received"] != receives:
            problems.append(f"NPU {r}: {v}")
    for k in range(program.controllers):
        v = reads.get(spec.npus + k)     # the Verilator bench reads the NPUs (all_done: all)
        if v is not None and (not v["done"] or v["link_errors"] or v["errors"]):
            problems.append(f"controller {k}: {v}")
    for s, v in enumerate(reads.get("switches", [])):
        if v["flags"]:
            problems.append(f"switch {s}: flags {v['flags']:#x} (bad_header, overflow, credit_error, uplink overflow)")
    return problems


def run_stripe_io(spec, program: IoStripeProgram, *, watchdog_cycles: int | None = None) -> dict:
    """``program`` (io-broadcast or io-reduce) on the packet fabric of ``spec`` under Verilator: one model
    (only the top's ports public, -O1), the packet fabric's cocotb bench
    (``cocotb_tests.fabric.bench_fabric``: load, start, poll ``all_done``, read the NPUs' and
    switches' registers). Returns ``{"cycles", "problems", "done", "sim_s", "build_s",
    "cycles_per_s"}``; ``problems`` empty when every NPU received and checked every flit."""
    top = stripe_io_top(spec, program)
    return run_striped_top(spec, program, top, [], stripe_io_writes(spec, program, top.packet),
                           watchdog_cycles=watchdog_cycles, top_key=stripe_top_key(spec, program))


def run_striped_top(spec, program, top, config, writes, *, watchdog_cycles: int | None = None,
                    name: str = "stripe-io", top_key: tuple | None = None) -> dict:
    """A striped I/O ``program`` on ``top`` (a :class:`PacketFabricTop` with a
    :class:`StripeNpu` at every NPU port) under Verilator, loaded with ``config`` (``[switch,
    slot, last, word]``) and ``writes``: :func:`run_stripe_io`'s bench and result.
    ``top_key``: what ``top``'s Verilog depends on (:func:`build_striped_top`)."""
    import time

    from cocotb_tests.fabric.packet_fabric_sim import PACKET_TOP
    from cocotb_tests.fabric.run import poll_cycles
    from cocotb_tests.runner import run_bench
    from hdl.designs.fabric.packet_fabric_top import PACKET_SWITCH_READ
    started = time.perf_counter()
    built = build_striped_top(top, top_key)
    build_s = time.perf_counter() - started
    if watchdog_cycles is None:     # the controllers' rate bounds the stream
        watchdog_cycles = int(8 * program.size_flits / min(spec.io_rate, 1)) + 20_000
    params = {"npus": spec.npus, "switch_count": len(spec.switch_ports), "config": config, "writes": writes,
              "watchdog_cycles": watchdog_cycles, "poll": poll_cycles(program.size_flits),
              "engine_read": list(StripeNpu.read_names), "switch_read": list(PACKET_SWITCH_READ)}
    name = f"{name}-{spec.name}-c{program.controllers}-{program.size_flits}"
    # built: run_bench needs the top's name only, not the Verilog
    metrics = run_bench(test_module="cocotb_tests.fabric.bench_fabric", verilog=("", PACKET_TOP),
                        bench_params=params, run_name=name, prebuilt=built).metrics
    after = metrics["after"]
    reads = dict(enumerate(after["engines"]), switches=after["switches"])
    cycles = after["global"]["cycles"]
    done = not metrics["stalled"] and bool(after["global"]["all_done"])
    return {"cycles": cycles, "done": done, "problems": judge_stripe_io(spec, program, reads),
            "sim_s": metrics["sim_s"], "build_s": build_s,
            "cycles_per_s": cycles / metrics["sim_s"] if metrics["sim_s"] else 0.0}


def build_striped_top(top, top_key: tuple | None = None):
    """The Verilated model (one model, only the top's ports public, :data:`PLAIN_CFLAGS`) of a
    striped I/O ``top``, built or found in the cache. ``top_key``: what its Verilog depends on
    (:func:`stripe_top_key`, ``shared_top_key``): a top this process has built already is not
    generated again (20 MB of Verilog, one to three minutes; ``fred fabric-validate`` runs
    four cases, two ops at two sizes, on each fabric's one or two tops); None: generate it."""
    from cocotb_tests.fabric.packet_fabric_sim import PACKET_TOP, PLAIN_CFLAGS
    from cocotb_tests.fabric.run import PORTS
    from eda.fabric.build import build_top_public_only
    from hdl.emit.verilog import to_verilog
    known = _STRIPED_BUILT.get(top_key) if top_key is not None else None
    if known is not None and (known / "build.ok").is_file():
        if isinstance(top, Elaboratable):
            top._MustUse__silence = True   # its Verilog is built already: no "created but never used" warning
        return known
    built = build_top_public_only(to_verilog(top, name=PACKET_TOP), PACKET_TOP, PORTS, cflags=PLAIN_CFLAGS)
    if top_key is not None:
        _STRIPED_BUILT[top_key] = built
    return built


#: ``top_key -> build folder`` of the striped tops this process has built or found.
_STRIPED_BUILT: dict = {}

#: Read registers of each kind of endpoint, in read-register order.
ENDPOINT_READS = {"npu": StripeNpu.read_names, "controller": PACKET_ENGINE_READ}
