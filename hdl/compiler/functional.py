"""Functional (golden) model of a configured Fred_m(P), and the configuration checker.

:func:`simulate` computes what leaves every port for given data on every port, adding
exactly where the configuration adds (input microswitches with ``reduce = 1``, RD outputs
``3``), always as ``in0 + in1`` with :mod:`hdl.contracts.dtypes`; the switch RTL must match it bit
for bit. :func:`symbolic` runs the same network on symbols and returns each output as an
addition tree (an ``int`` port, or ``("+", in0_tree, in1_tree)``), which shows the exact
reduction order. :func:`check_config` verifies that a configuration realises a set of
flows: each output of a flow receives each of the flow's inputs exactly once and nothing
else, outputs outside every flow receive nothing, and no value is lost inside the network
(a value placed on a wire that no microswitch takes, or a sum missing an operand).
:func:`check_numeric` repeats the check with numbers: exact int32 sums against the flow
definition, and, for floating-point formats, bit-exact agreement with the addition tree.

Data: ``inputs`` is a sequence of length P; entry p is the data entering port p (a scalar
or array of bit patterns of ``dtype``) or ``None`` (no data). Outputs likewise.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Sequence

import numpy as np

from hdl.contracts.errors import FredError
from hdl.contracts.encoding import RD_IN0, RD_IN1, RD_SUM, SwitchConfig
from hdl.compiler.flows import Flow, validate_flows
from hdl.contracts.dtypes import get_dtype

__all__ = ["simulate", "symbolic", "leaves", "evaluate", "check_config", "verify_config",
           "check_numeric"]


def _as_config(ports: int, middle: int, config) -> SwitchConfig:
    if isinstance(config, SwitchConfig):
        if (config.ports, config.middle) != (ports, middle):
            raise FredError(f"configuration is for Fred_{config.middle}({config.ports}), not "
                            f"Fred_{middle}({ports})")
        return config
    return SwitchConfig.decode(config, ports=ports, middle=middle)


def _run(config: SwitchConfig, values: list, add: Callable, lost: list, prefix: str) -> list:
    """Propagate ``values`` (one per port, None = no data) through ``config``."""
    if config.ports == 2:
        rd = config.modes[0]
        a, b = values
        name = prefix + "rd"
        total = add(a, b, name) if RD_SUM in (rd.out0, rd.out1) else None
        pick = {0: None, RD_IN0: a, RD_IN1: b, RD_SUM: total}
        if not prefix:
            # Fred_m(2) alone: its inputs are the ports, and not selecting a port simply
            # does not accept its data (like a disabled input microswitch).
            return [pick[rd.out0], pick[rd.out1]]
        if a is not None and RD_SUM not in (rd.out0, rd.out1) and RD_IN0 not in (rd.out0, rd.out1):
            lost.append(f"{name}: in0 carries data that no output takes")
        if b is not None and RD_SUM not in (rd.out0, rd.out1) and RD_IN1 not in (rd.out0, rd.out1):
            lost.append(f"{name}: in1 carries data that no output takes")
        return [pick[rd.out0], pick[rd.out1]]
    m, r, odd = config.middle, config.ports // 2, config.ports % 2
    wires = [[None] * (r + odd) for _ in range(m)]
    for u, mode in enumerate(config.input_modes):
        a, b = values[2 * u], values[2 * u + 1]
        if mode.reduce:
            wires[mode.in0_wire][u] = add(a, b, f"{prefix}in[{u}]")
            continue
        # A disabled input simply does not accept its port's data (nothing is lost).
        if mode.in0_en:
            wires[mode.in0_wire][u] = a
        if mode.in1_en:
            wires[mode.in1_wire][u] = b
    if odd and config.demux.en:  # odd P: the last port enters one subnetwork's last sub-port
        wires[config.demux.wire][r] = values[-1]
    sub_outputs = [_run(config.subnetwork(k), wires[k], add, lost, f"{prefix}mid[{k}].")
                   for k in range(m)]
    outputs = [None] * config.ports
    for v, mode in enumerate(config.output_modes):
        taken = set()
        if mode.out0_en:
            outputs[2 * v] = sub_outputs[mode.out0_wire][v]
            taken.add(mode.out0_wire)
        if mode.out1_en:
            outputs[2 * v + 1] = sub_outputs[mode.out1_wire][v]
            taken.add(mode.out1_wire)
        for k in range(m):
            if k not in taken and sub_outputs[k][v] is not None:
                lost.append(f"{prefix}out[{v}]: wire {k} carries data that no output takes")
    if odd:
        mux = config.mux
        if mux.en:
            outputs[-1] = sub_outputs[mux.wire][r]
        for k in range(m):
            if not (mux.en and k == mux.wire) and sub_outputs[k][r] is not None:
                lost.append(f"{prefix}mux: wire {k} carries data that no output takes")
    return outputs


def _check_inputs(ports: int, inputs) -> list:
    inputs = list(inputs)
    if len(inputs) != ports:
        raise FredError(f"expected data for {ports} ports (None for no data), got {len(inputs)}")
    return inputs


def simulate(ports: int, middle: int, config, dtype, inputs: Sequence) -> list:
    """Data leaving each port of Fred_m(P) configured by ``config`` (a SwitchConfig or its
    encoded words) when ``inputs[p]`` enters port p (bit patterns of ``dtype``, or None).

    Returns a list of length P: numpy arrays of bit patterns, or None for ports that
    receive nothing. Raises :class:`FredError` if a configured sum lacks an operand.
    """
    config = _as_config(ports, middle, config)
    dt = get_dtype(dtype)
    values = [None if x is None else dt.bits(x) for x in _check_inputs(ports, inputs)]

    def add(a, b, where):
        if a is None or b is None:
            missing = "in0" if a is None else "in1"
            raise FredError(f"{where}: configured to add in0 + in1 but {missing} carries no data")
        return dt.add(a, b)

    return _run(config, values, add, [], "")


def symbolic(config: SwitchConfig, present: Sequence[int] | None = None) -> tuple[list, list[str]]:
    """Addition tree arriving at each output, and the list of problems met on the way.

    ``present``: the ports that carry data (default: all). A tree is an ``int`` port or
    ``("+", in0_tree, in1_tree)``; an output receiving nothing is ``None``. Problems are
    values lost in the network and sums missing an operand.
    """
    ports = config.ports
    present = set(range(ports) if present is None else present)
    problems: list[str] = []

    def add(a, b, where):
        if a is None or b is None:
            problems.append(f"{where}: adds in0 + in1 but {'in0' if a is None else 'in1'} "
                            "carries no data")
            return a if b is None else b
        return ("+", a, b)

    outputs = _run(config, [p if p in present else None for p in range(ports)], add, problems, "")
    return outputs, problems


def leaves(tree) -> Counter:
    """Multiset of input ports contributing to a tree."""
    counter: Counter = Counter()
    stack = [tree]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        if isinstance(node, tuple):
            stack.extend(node[1:])
        else:
            counter[node] += 1
    return counter


def evaluate(tree, dtype, inputs: Sequence):
    """Evaluate an addition tree on data (``inputs[p]`` bit patterns) with :mod:`hdl.contracts.dtypes`."""
    dt = get_dtype(dtype)
    if tree is None:
        return None
    if isinstance(tree, tuple):
        return dt.add(evaluate(tree[1], dt, inputs), evaluate(tree[2], dt, inputs))
    return dt.bits(inputs[tree])


def check_config(config: SwitchConfig, flows: Sequence[Flow]) -> list[str]:
    """Problems that stop ``config`` from realising ``flows`` (empty list = it does).

    Symbolic check with data on every port, including ports outside every flow: each
    output of a flow must receive each input of the flow exactly once and nothing else;
    every other output must receive nothing; nothing may be lost inside the network.
    """
    flows = validate_flows(flows, config.ports)
    outputs, problems = symbolic(config)
    problems = list(problems)
    owner = {p: flow for flow in flows for p in flow.outputs}
    for port, tree in enumerate(outputs):
        got = leaves(tree)
        flow = owner.get(port)
        if flow is None:
            if got:
                problems.append(f"output {port} is in no flow but receives inputs {sorted(got.elements())}")
            continue
        want = Counter(flow.inputs)
        if got != want:
            missing = sorted((want - got).elements())
            extra = sorted((got - want).elements())
            detail = []
            if missing:
                detail.append(f"missing inputs {missing}")
            if extra:
                detail.append(f"extra/duplicated inputs {extra}")
            problems.append(f"output {port} (flow {flow}): {', '.join(detail)}")
    return problems


def verify_config(config: SwitchConfig, flows: Sequence[Flow]) -> None:
    """Raise :class:`FredError` listing the problems found by :func:`check_config`."""
    problems = check_config(config, flows)
    if problems:
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        raise FredError(f"configuration does not realise the flows: {'; '.join(problems[:3])}{more}")


def check_numeric(config: SwitchConfig, flows: Sequence[Flow], *, dtype: str = "int32",
                  lanes: int = 4, rng: np.random.Generator | None = None) -> list[str]:
    """Numeric check of ``config`` against ``flows`` with random data on the flows' inputs.

    int32: each flow output must equal the wrapping sum of its flow's inputs (order-free,
    so this checks the flow definition independently of the tree). Floating point: each
    output must equal, bit for bit, its symbolic addition tree evaluated with hdl.contracts.dtypes,
    and hold exactly the flow's inputs. Ports outside every flow must receive nothing.
    """
    flows = validate_flows(flows, config.ports)
    dt = get_dtype(dtype)
    rng = rng if rng is not None else np.random.default_rng(0)
    active = sorted(p for f in flows for p in f.inputs)
    inputs = [None] * config.ports
    for p in active:
        inputs[p] = dt.random_bits(rng, (lanes,))
    outputs = simulate(config.ports, config.middle, config, dt, inputs)
    owner = {p: flow for flow in flows for p in flow.outputs}
    problems = []
    trees = symbolic(config, present=active)[0] if dt.is_float else None
    for port, value in enumerate(outputs):
        flow = owner.get(port)
        if flow is None:
            if value is not None:
                problems.append(f"output {port} is in no flow but receives data")
            continue
        if value is None:
            problems.append(f"output {port} (flow {flow}) receives nothing")
            continue
        if dt.is_float:
            if leaves(trees[port]) != Counter(flow.inputs):
                problems.append(f"output {port} (flow {flow}) adds the wrong inputs")
            elif not np.array_equal(value, evaluate(trees[port], dt, inputs)):
                problems.append(f"output {port} (flow {flow}) differs from its addition tree")
        else:
            expected = dt.sum(inputs[p] for p in flow.inputs)
            if not np.array_equal(value, expected):
                problems.append(f"output {port} (flow {flow}): got {value.tolist()}, "
                                f"want {expected.tolist()}")
    return problems
