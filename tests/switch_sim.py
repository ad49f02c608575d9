"""Amaranth-simulator harness for the switch's stream components (used by tests/test_switch_*.py).

One testbench drives every input stream from a queue (random idle cycles, valid held until the
transfer) and every output's ``ready`` (random backpressure), and records each transfer with the
cycle it happened at. A transfer is ``valid & ready`` sampled just before a rising edge.
"""

from __future__ import annotations

import random

from amaranth.sim import Simulator


def _value(x):
    return x.as_value() if hasattr(x, "as_value") else x


def run_streams(dut, *, inputs: dict, outputs: dict, settings=(),
                idle: float = 0.0, backpressure: float = 0.0, rng: random.Random | None = None,
                until=None, max_cycles: int = 20_000, probes: dict | None = None):
    """Run ``dut`` until every queued input item was sent and ``until(received)`` holds.

    Parameters:
        inputs: ``{name: (stream, [payload ints])}``; outputs: ``{name: stream}``.
        settings: ``[(signal, int)]`` set before the first cycle (modes, configuration).
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
