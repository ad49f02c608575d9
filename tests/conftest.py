"""The harnesses the tests share, in one place, exposed as fixtures.

Each harness drives a design in Amaranth's Python simulator (the Verilator benches have their
own, in :mod:`cocotb_tests`):

* ``run_streams`` -- every input stream of a switch component fed from a queue (random idle
  cycles, valid held until the transfer), every output's ``ready`` driven (random
  backpressure), each transfer recorded with its cycle;
* ``adder_driver`` -- a :class:`~hdl.designs.reduction.ReductionUnit` fed operand flits
  (``run_unit``, ``pack_flits``, ``unpack_flits``);
* ``exact_add`` -- exact rational IEEE-754 addition for any widths, the reference of the
  generic float adder on small formats;
* ``program_and_start`` -- register writes through a fabric block's program port, then a
  start pulse;
* ``run_fabric_top`` -- a fabric top (mesh fabric, mesh I/O) programmed, started and read back
  through its harness ports; ``run_mesh_io_top`` -- the same for a mesh I/O top, its program
  registers and read-back layout written once.

Tests find their module's tests by path: ``tests/<package>/<sub-package>/test_*.py`` mirrors
the package tree (``tests/hdl/contracts/`` tests :mod:`hdl.contracts`, ...); tests of the
whole tree (layering, install) sit in ``tests/`` itself.
"""

from __future__ import annotations

import random
import types
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
from amaranth.sim import Simulator


# ----------------------------------------------------------------------------------------------
# Switch stream components
#
# Amaranth-simulator harness for the switch's stream components.
#
# One testbench drives every input stream from a queue (random idle cycles, valid held until the
# transfer) and every output's ``ready`` (random backpressure), and records each transfer with the
# cycle it happened at. A transfer is ``valid & ready`` sampled just before a rising edge.
# ----------------------------------------------------------------------------------------------

def _value(x):
    return x.as_value() if hasattr(x, "as_value") else x


def run_streams(dut, *, inputs: dict, outputs: dict, settings=(), pulses=(),
                idle: float = 0.0, backpressure: float = 0.0, rng: random.Random | None = None,
                until=None, max_cycles: int = 20_000, probes: dict | None = None):
    """Run ``dut`` until every queued input item was sent and ``until(received)`` holds.

    Parameters:
        inputs: ``{name: (stream, [payload ints])}``; outputs: ``{name: stream}``.
        settings: ``[(signal, int)]`` set before the first cycle (modes, configuration).
        pulses: ``[(signal, int)]`` held for one cycle after ``settings`` and before the
            streams' first cycle, then set to 0 (a start or ``restart`` strobe); that cycle
            is not counted: the streams' cycle 0 is the one after it.
        until: ``callable(received) -> bool``; default: stop once inputs are empty and nothing
            arrived for 64 cycles.
        probes: ``{name: signal}`` sampled every cycle (returned under ``"probes"``).

    Returns ``{"received": {name: [(cycle, payload)]}, "sent": {name: [cycle]}, "cycles": n,
    "probes": {name: [values]}}``.
    """
    rng = rng or random.Random(0)
    probes = probes or {}
    received = {name: [] for name in outputs}
    sent = {name: [] for name in inputs}
    probe_values = {name: [] for name in probes}
    state = {"cycles": 0}

    async def bench(ctx):
        for signal, value in settings:
            ctx.set(_value(signal), value)
        if pulses:
            for signal, value in pulses:
                ctx.set(_value(signal), value)
            await ctx.tick()
            for signal, _ in pulses:
                ctx.set(_value(signal), 0)
        queues = {name: list(items) for name, (_, items) in inputs.items()}
        current = {name: None for name in inputs}
        quiet = 0
        for cycle in range(max_cycles):
            for name, (stream, _) in inputs.items():
                if current[name] is None and queues[name] and rng.random() >= idle:
                    current[name] = queues[name].pop(0)
                ctx.set(stream.valid, current[name] is not None)
                ctx.set(_value(stream.payload), current[name] or 0)
            for name, stream in outputs.items():
                ctx.set(stream.ready, rng.random() >= backpressure)
            watched = []
            for name, (stream, _) in inputs.items():
                watched += [stream.valid, stream.ready]
            for name, stream in outputs.items():
                watched += [stream.valid, stream.ready, _value(stream.payload)]
            watched += [_value(s) for s in probes.values()]
            values = list((await ctx.tick().sample(*watched))[2:])
            moved = False
            for name in inputs:
                valid, ready = values.pop(0), values.pop(0)
                if valid and ready:
                    sent[name].append(cycle)
                    current[name] = None
                    moved = True
            for name in outputs:
                valid, ready, payload = values.pop(0), values.pop(0), values.pop(0)
                if valid and ready:
                    received[name].append((cycle, int(payload)))
                    moved = True
            for name in probes:
                probe_values[name].append(int(values.pop(0)))
            quiet = 0 if moved else quiet + 1
            state["cycles"] = cycle + 1
            inputs_done = all(not q for q in queues.values()) and all(c is None for c in current.values())
            if inputs_done and (until(received) if until else quiet >= 64):
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return {"received": received, "sent": sent, "cycles": state["cycles"], "probes": probe_values}


# ----------------------------------------------------------------------------------------------
# Reduction unit
#
# Drive a ReductionUnit in Amaranth's Python simulator.
#
# :func:`run_unit` pushes operand flits through a/b with optional random idle cycles on
# the inputs and random backpressure on o, and returns every flit transferred on o, in
# order, plus cycle counts. Payloads are plain ints (lanes packed lane 0 at the LSBs).
# ----------------------------------------------------------------------------------------------

@dataclass
class SimRun:
    outputs: list          #: payload ints (data only) transferred on o, in order
    sidebands: list        #: sideband ints (None when the unit has no sideband)
    cycles: int            #: clock cycles simulated
    first_output_cycle: int | None  #: cycle of the first o transfer
    first_input_cycle: int | None   #: cycle of the first a/b transfer
    output_cycles: list = None      #: cycle of every o transfer
    input_cycles: list = None       #: cycle of every a/b transfer


def pack_flits(values: np.ndarray, width: int) -> list[int]:
    """(flits, lanes) array of bit patterns -> list of packed ints (lane 0 at the LSBs)."""
    values = np.asarray(values, dtype=np.uint64)
    flits, lanes = values.shape
    words = [0] * flits
    for lane in range(lanes):
        column = values[:, lane].tolist()
        shift = lane * width
        for i, v in enumerate(column):
            words[i] |= v << shift
    return words


def unpack_flits(words, width: int, lanes: int) -> np.ndarray:
    mask = (1 << width) - 1
    out = np.zeros((len(words), lanes), dtype=np.uint64)
    for lane in range(lanes):
        out[:, lane] = [(w >> (lane * width)) & mask for w in words]
    return out


def run_unit(unit, a_words, b_words, *, sidebands=None, b_sidebands=None, input_idle=0.0,
             output_stall=0.0, seed=0, max_cycles=None) -> SimRun:
    """Simulate ``unit`` on the flit sequences ``a_words``/``b_words`` (equal lengths).

    ``input_idle``: probability that a or b (independently) withholds valid in a cycle.
    ``output_stall``: probability that o.ready is low in a cycle.
    """
    assert len(a_words) == len(b_words)
    count = len(a_words)
    rng = np.random.default_rng(seed)
    # twice the expected cycle count: a transfer needs a and b offered and o ready
    rate = max(0.01, (1 - input_idle) ** 2 * (1 - output_stall))
    limit = max_cycles or int(2 * (count + unit.latency + 10) / rate) + 1000
    has_sideband = unit.sideband is not None
    result = SimRun([], [], 0, None, None, [], [])

    async def bench(ctx):
        a_next = b_next = 0
        cycle = 0
        a, b, o = unit.a, unit.b, unit.o
        a_data = a.payload.data if has_sideband else a.payload
        b_data = b.payload.data if has_sideband else b.payload
        o_data = o.payload.data if has_sideband else o.payload
        a_idle = rng.random(limit) < input_idle
        b_idle = rng.random(limit) < input_idle
        stall = rng.random(limit) < output_stall
        a_offer = b_offer = False
        while len(result.outputs) < count:
            if cycle >= limit:
                raise AssertionError(f"no progress: {len(result.outputs)}/{count} flits out "
                                     f"after {cycle} cycles")
            # a producer keeps valid and payload while it waits for ready (stream rules)
            if not a_offer and a_next < count and not a_idle[cycle]:
                a_offer = True
                ctx.set(a_data, a_words[a_next])
                if has_sideband:
                    ctx.set(a.payload.sideband, sidebands[a_next])
            if not b_offer and b_next < count and not b_idle[cycle]:
                b_offer = True
                ctx.set(b_data, b_words[b_next])
                if has_sideband and b_sidebands is not None:
                    ctx.set(b.payload.sideband, b_sidebands[b_next])
            ctx.set(a.valid, a_offer)
            ctx.set(b.valid, b_offer)
            ctx.set(o.ready, not stall[cycle])
            a_fire = a_offer and ctx.get(a.ready)
            b_fire = b_offer and ctx.get(b.ready)
            assert a_fire == b_fire, f"cycle {cycle}: a and b did not transfer together"
            if a_fire:
                if result.first_input_cycle is None:
                    result.first_input_cycle = cycle
                result.input_cycles.append(cycle)
                a_next += 1
                b_next += 1
                a_offer = b_offer = False
            if not stall[cycle] and ctx.get(o.valid):
                if result.first_output_cycle is None:
                    result.first_output_cycle = cycle
                result.output_cycles.append(cycle)
                result.outputs.append(ctx.get(o_data))
                if has_sideband:
                    result.sidebands.append(ctx.get(o.payload.sideband))
            await ctx.tick()
            cycle += 1
        result.cycles = cycle

    sim = Simulator(unit)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return result


# ----------------------------------------------------------------------------------------------
# Exact reference adder
#
# Exact (rational) IEEE-754 addition for ANY (exponent, fraction) widths -- tests only.
#
# :mod:`hdl.contracts.dtypes` is the golden model for the project's formats; it relies on numpy and
# so cannot describe arbitrary widths. The float adder is generic, so the tests also run
# it on small formats exhaustively, against this reference: decode both operands to exact
# fractions, add exactly, round to nearest even, encode. Same special-value policy as
# hdl.contracts.dtypes (any NaN or inf - inf gives the canonical quiet NaN). The tests check this
# reference against hdl.contracts.dtypes on fp16 and bf16 before trusting it elsewhere.
# ----------------------------------------------------------------------------------------------

def _decode(bits: int, e: int, f: int):
    sign = (bits >> (e + f)) & 1
    exponent = (bits >> f) & ((1 << e) - 1)
    fraction = bits & ((1 << f) - 1)
    if exponent == (1 << e) - 1:
        return sign, ("nan" if fraction else "inf")
    bias = (1 << (e - 1)) - 1
    significand = fraction | ((exponent != 0) << f)
    value = Fraction(significand) * Fraction(2) ** (max(exponent, 1) - bias - f)
    return sign, (-value if sign else value)


def _round_half_even(value: Fraction) -> int:
    floor = value.numerator // value.denominator
    rest = value - floor
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and floor % 2 == 1):
        floor += 1
    return floor


def _encode(value: Fraction, e: int, f: int) -> int:
    """Round a non-zero exact value to the format (nearest even; overflow to infinity)."""
    sign = 1 if value < 0 else 0
    magnitude = -value if sign else value
    bias = (1 << (e - 1)) - 1
    exp_max = (1 << e) - 1
    # unbiased exponent E with 2**E <= magnitude < 2**(E+1)
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** exponent > magnitude:
        exponent -= 1
    exponent = max(exponent, 1 - bias)          # below the normal range: subnormal scale
    significand = _round_half_even(magnitude / Fraction(2) ** (exponent - f))
    if significand >= (2 << f):                 # rounding carried into the next binade
        significand >>= 1
        exponent += 1
    if significand < (1 << f):                  # subnormal (exponent field 0)
        field = 0
    else:
        field = exponent + bias
        significand -= 1 << f
    if field >= exp_max:
        return (sign << (e + f)) | (exp_max << f)
    return (sign << (e + f)) | (field << f) | significand


def exact_add(a: int, b: int, e: int, f: int) -> int:
    """``a + b`` on bit patterns of the format with ``e`` exponent and ``f`` fraction bits."""
    exp_max = (1 << e) - 1
    canonical_nan = (exp_max << f) | (1 << (f - 1))
    sign_a, value_a = _decode(a, e, f)
    sign_b, value_b = _decode(b, e, f)
    if value_a == "nan" or value_b == "nan":
        return canonical_nan
    if value_a == "inf" and value_b == "inf":
        return canonical_nan if sign_a != sign_b else a
    if value_a == "inf":
        return a
    if value_b == "inf":
        return b
    total = value_a + value_b
    if total == 0:  # exact zero: -0 only for (-0) + (-0) in round to nearest
        return (sign_a & sign_b) << (e + f)
    return _encode(total, e, f)


# ----------------------------------------------------------------------------------------------
# Fabric programmable blocks
#
# Amaranth-simulator helper for the fabric's programmable blocks (tests only; the Verilator
# fabric is programmed through :class:`~hdl.designs.fabric.fabric_top.FabricTop`'s ports by cocotb).
# ----------------------------------------------------------------------------------------------

async def program_and_start(ctx, dut, writes) -> None:
    """Write ``writes`` ((register address, value) pairs) through ``dut``'s program port
    (``we``/``waddr``/``wdata``: an :class:`~hdl.designs.fabric.npu_engine.NpuEngine` or a
    :class:`~hdl.designs.fabric.phase_sequencer.PhaseSequencer`), one per cycle, then pulse ``start``
    for one cycle."""
    for reg, value in writes:
        ctx.set(dut.we, 1)
        ctx.set(dut.waddr, reg)
        ctx.set(dut.wdata, value)
        await ctx.tick()
    ctx.set(dut.we, 0)
    ctx.set(dut.start, 1)
    await ctx.tick()
    ctx.set(dut.start, 0)


def run_fabric_top(dut, writes, read_back, *, max_cycles: int, with_write: bool = False, config=(),
                   each_cycle=None) -> dict:
    """Run a fabric top with the shared harness ports (``clk``, ``prog_we/unit/reg/data``,
    ``start``, ``all_done``, the registered ``rd_unit/rd_reg`` -> ``rd_data``;
    :mod:`cocotb_tests.fabric.harness` drives the same ports under Verilator) in the Amaranth
    simulator: 8 cycles of the top's own reset, every ``(unit, register, value)`` of ``writes``
    one a cycle, a ``start`` pulse, then cycles until ``all_done`` (not before the 5th) or
    ``max_cycles``. Then ``read_back(read)`` is awaited, ``read(unit, reg)`` being an async
    register read (``with_write``: ``read_back(read, write)``, ``write(unit, reg, value)`` an
    async program-port write, e.g. of a read-address register); what it returns is returned.
    ``config``: ``[switch, slot, last, word]`` configuration words streamed into the ``cfg_*``
    port (each held until ``cfg_ready``) before the writes (a packet fabric's stored slots).
    ``each_cycle(ctx, dut)``: awaited after every clock edge of the run (e.g. the lock-step
    rule's check of a cut fabric's joined parts, ``tests/hdl/designs/test_packet_partition_sim.py``)."""
    out = {}

    async def clock(ctx):   # the tops take their clock as a port: a free-running 10 ns clock
        while True:
            ctx.set(dut.clk, 0)
            await ctx.delay(5e-9)
            ctx.set(dut.clk, 1)
            await ctx.delay(5e-9)

    async def bench(ctx):
        async def read(unit, reg):
            ctx.set(dut.rd_unit, unit)
            ctx.set(dut.rd_reg, reg)
            await ctx.posedge(dut.clk)
            await ctx.posedge(dut.clk)
            return ctx.get(dut.rd_data)

        async def put(unit, reg, value):    # one program-port write, prog_we left high
            ctx.set(dut.prog_we, 1)
            ctx.set(dut.prog_unit, unit)
            ctx.set(dut.prog_reg, reg)
            ctx.set(dut.prog_data, value)
            await ctx.posedge(dut.clk)

        async def write(unit, reg, value):
            await put(unit, reg, value)
            ctx.set(dut.prog_we, 0)
            await ctx.posedge(dut.clk)

        for _ in range(8):
            await ctx.posedge(dut.clk)
        if config:
            from cocotb_tests.fabric.packet_fabric_sim import stream_configuration
            await stream_configuration(ctx, dut, config)
        for unit, reg, value in writes:     # back to back, one a cycle
            await put(unit, reg, value)
        ctx.set(dut.prog_we, 0)
        await ctx.posedge(dut.clk)
        ctx.set(dut.start, 1)
        await ctx.posedge(dut.clk)
        ctx.set(dut.start, 0)
        for cycle in range(max_cycles):
            await ctx.posedge(dut.clk)
            if each_cycle is not None:
                await each_cycle(ctx, dut)
            if cycle > 4 and ctx.get(dut.all_done):
                break
        out.update(await (read_back(read, write) if with_write else read_back(read)))

    sim = Simulator(dut)
    sim.add_process(clock)
    sim.add_testbench(bench)
    sim.run()
    return out


def cut_checker(seed):
    """``(each_cycle, seen)`` for a bench of :class:`~hdl.designs.fabric.joined_parts.JoinedParts`:
    ``each_cycle(ctx, dut)`` sets each part's ``perturb`` (XORed into its ``cut_in``) to random
    bits and requires its ``cut_out`` unchanged (the lock-step rule: a cut signal depends only on
    its own part's registers), then clears them; ``seen`` counts the cycles checked and those
    with a cut signal high."""
    rng = random.Random(seed)
    seen = {"cycles": 0, "moved": 0}

    async def each_cycle(ctx, dut):
        before = [ctx.get(dut.cut_out[p]) for p in range(2)]
        width = len(dut.perturb[0])
        for p in range(2):
            ctx.set(dut.perturb[p], rng.getrandbits(width))
        after = [ctx.get(dut.cut_out[p]) for p in range(2)]
        for p in range(2):
            ctx.set(dut.perturb[p], 0)
        assert after == before, f"a cut_out depends on its part's cut_in (cycle {seen['cycles']})"
        seen["cycles"] += 1
        seen["moved"] += any(before)
    return each_cycle, seen


# ----------------------------------------------------------------------------------------------
# Fixtures
# ----------------------------------------------------------------------------------------------

@pytest.fixture(name="run_streams")
def _run_streams_fixture():
    """:func:`run_streams`: drive a stream component in the Amaranth simulator."""
    return run_streams


@pytest.fixture(name="adder_driver")
def _adder_driver_fixture():
    """The reduction-unit driver: ``.run_unit``, ``.pack_flits``, ``.unpack_flits``."""
    return types.SimpleNamespace(run_unit=run_unit, pack_flits=pack_flits, unpack_flits=unpack_flits)


@pytest.fixture(name="exact_add")
def _exact_add_fixture():
    """:func:`exact_add`: exact IEEE-754 addition for any (exponent, fraction) widths."""
    return exact_add


@pytest.fixture(name="program_and_start")
def _program_and_start_fixture():
    """:func:`program_and_start`: load a fabric block's registers, then pulse ``start``."""
    return program_and_start


def run_mesh_io_top(dut, *, stripe: int, mode_index: int, stall: int, npu_read, controller_read,
                    max_cycles: int = 4000) -> dict:
    """Run a mesh I/O top (``MeshIoTop``, ``MeshIoStoreTop``) with :func:`run_fabric_top`: its
    program registers ``IO_REGS`` written (at unit 0: the tops ignore the unit), then
    ``{"global": ..., "npus": [...], "controllers": [...]}`` read back, the NPUs' registers
    ``npu_read`` and the controllers' ``controller_read`` by name."""
    from hdl.designs.fabric.fabric_top import GLOBAL_UNIT
    from hdl.designs.mesh.mesh_io_harness import IO_GLOBAL_READ, IO_REGS, controller_unit
    spec = dut.spec
    values = {"stripe": stripe, "mode": mode_index, "stall": stall}
    writes = [(0, IO_REGS.index(name), values[name]) for name in IO_REGS]

    async def read_back(read):
        return {"global": {n: await read(GLOBAL_UNIT, i) for i, n in enumerate(IO_GLOBAL_READ)},
                "npus": [{n: await read(r, i) for i, n in enumerate(npu_read)} for r in range(spec.mesh.npus)],
                "controllers": [{n: await read(controller_unit(spec, k), i) for i, n in enumerate(controller_read)}
                                for k in range(spec.controllers)]}

    return run_fabric_top(dut, writes, read_back, max_cycles=max_cycles)


async def read_trace_npus(read, write, node_counts, names) -> list[dict]:
    """An iteration top's NPUs read back through :func:`run_fabric_top`'s ``read`` / ``write``
    (``with_write``): per rank of ``node_counts`` (``{rank: nodes}`` or a list of counts), its
    registers ``names`` (the NPU's ``read_names``, unit = rank) and ``times``, every node's
    (start, end) cycles (its trace's read-address register written, then the two reads)."""
    from hdl.contracts.trace_program import TRACE_READ_ADDR
    counts = node_counts.items() if isinstance(node_counts, dict) else enumerate(node_counts)
    npus = []
    for rank, nodes in counts:
        npu = {n: await read(rank, i) for i, n in enumerate(names)}
        npu["times"] = []
        for node in range(nodes):
            await write(rank, TRACE_READ_ADDR, node)
            npu["times"].append((await read(rank, names.index("node_start")),
                                 await read(rank, names.index("node_end"))))
        npus.append(npu)
    return npus


async def read_iteration(read, write, node_counts, names) -> dict:
    """An iteration top read back: its global ``cycles`` and ``all_done`` and
    :func:`read_trace_npus`' ``npus``."""
    from hdl.designs.fabric.fabric_top import GLOBAL_UNIT
    return {"cycles": await read(GLOBAL_UNIT, 0), "all_done": await read(GLOBAL_UNIT, 1),
            "npus": await read_trace_npus(read, write, node_counts, names)}


@pytest.fixture(name="cut_checker")
def _cut_checker_fixture():
    """:func:`cut_checker`: the lock-step rule checked in every cycle of a joined parts' bench."""
    return cut_checker


@pytest.fixture(name="read_trace_npus")
def _read_trace_npus_fixture():
    """:func:`read_trace_npus`: an iteration top's NPU registers and node times, read back."""
    return read_trace_npus


@pytest.fixture(name="read_iteration")
def _read_iteration_fixture():
    """:func:`read_iteration`: an iteration top's cycles, ``all_done`` and NPUs, read back."""
    return read_iteration


@pytest.fixture(name="run_fabric_top")
def _run_fabric_top_fixture():
    """:func:`run_fabric_top`: program, start and read back a fabric top in the Amaranth simulator."""
    return run_fabric_top


@pytest.fixture(name="run_mesh_io_top")
def _run_mesh_io_top_fixture():
    """:func:`run_mesh_io_top`: program, start and read back a mesh I/O top in the Amaranth simulator."""
    return run_mesh_io_top
