"""Property tests of every collective lowering, end to end: lower -> route every phase ->
run the functional model on int32 data -> the receive buffers equal the collective's
definition (hdl.compiler.collectives.reference_result)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hdl.contracts.errors import FredError
from hdl.compiler import Router, check_config, lower_collective, schedule_collective, simulate
from hdl.compiler.collectives import COLLECTIVES, reference_result
from hdl.contracts.dtypes import get_dtype

INT32 = get_dtype("int32")
LANES = 3
_ROUTERS: dict = {}


def _router(ports, middle):
    key = (ports, middle)
    if key not in _ROUTERS:
        _ROUTERS[key] = Router(ports=ports, middle=middle)
    return _ROUTERS[key]


def execute(schedule, ports, middle, send):
    """Run a lowered collective through routed configurations and the functional model."""
    recv = send.copy()
    router = _router(ports, middle)
    for transfers in schedule.phases:
        by_flow = {t.flow: t for t in transfers}
        result = router.route([t.flow for t in transfers])
        for phase in result.phases:
            assert check_config(phase.config, phase.flows) == []
            inputs = [None] * ports
            for flow in phase.flows:
                for p in flow.inputs:
                    inputs[p] = send[p, by_flow[flow].send]
            outputs = simulate(ports, middle, phase.config, INT32, inputs)
            for port in range(ports):
                owner = [f for f in phase.flows if port in f.outputs]
                if owner:
                    recv[port, by_flow[owner[0]].recv] = outputs[port]
                else:
                    assert outputs[port] is None
    return recv


def _wrap_add(a, b):
    return INT32.add(a, b)


@st.composite
def collective_case(draw, op):
    ports = draw(st.sampled_from([2, 3, 4, 5, 8, 12, 16, 20, 32]))  # any P >= 2 routes
    middle = draw(st.integers(2, 4))
    kwargs = {}
    if op in ("unicast", "permutation"):
        count = draw(st.integers(1, ports))
        srcs = draw(st.permutations(range(ports)))[:count]
        dsts = draw(st.permutations(range(ports)))[:count]
        kwargs["pairs"] = list(zip(srcs, dsts))
    else:
        size = draw(st.integers(1, min(ports, 12)))
        kwargs["group"] = draw(st.permutations(range(ports)))[:size]
        if op in ("reduce", "broadcast"):
            kwargs["root"] = draw(st.sampled_from(kwargs["group"]))
        elif op == "multicast":
            kwargs["root"] = draw(st.integers(0, ports - 1))
    seed = draw(st.integers(0, 2**32 - 1))
    return ports, middle, kwargs, seed


def _check(op, case):
    ports, middle, kwargs, seed = case
    schedule = schedule_collective(op, ports=ports, **kwargs)
    assert lower_collective(op, ports=ports, **kwargs) == schedule.flow_phases()
    for phase in schedule.phases:  # flows of one phase may share the switch
        inputs = [p for t in phase for p in t.flow.inputs]
        outputs = [p for t in phase for p in t.flow.outputs]
        assert len(inputs) == len(set(inputs)) and len(outputs) == len(set(outputs))
    rng = np.random.default_rng(seed)
    send = INT32.random_bits(rng, (ports, schedule.chunks, LANES))
    got = execute(schedule, ports, middle, send)
    want = reference_result(op, send, add=_wrap_add, **kwargs)
    assert np.array_equal(got, want)


_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("op", COLLECTIVES)
def test_collective_lowering_matches_definition(op):
    @_SETTINGS
    @given(collective_case(op))
    def run(case):
        _check(op, case)

    run()


def test_phase_counts():
    group = (3, 1, 4, 0)
    assert len(lower_collective("all-reduce", group=group, ports=8)) == 1
    assert len(lower_collective("reduce-scatter", group=group, ports=8)) == 4
    assert len(lower_collective("all-gather", group=group, ports=8)) == 4
    assert len(lower_collective("all-to-all", group=group, ports=8)) == 3
    assert lower_collective("all_reduce", group=(0, 1), ports=2)[0][0].outputs == (0, 1)


@pytest.mark.parametrize("call,message", [
    (lambda: lower_collective("gossip", group=(0, 1), ports=4), "unknown collective"),
    (lambda: lower_collective("all-reduce", group=(), ports=4), "group is empty"),
    (lambda: lower_collective("all-reduce", group=(0, 4), ports=4), "out of range"),
    (lambda: lower_collective("all-reduce", group=(0, 0), ports=4), "more than once"),
    (lambda: lower_collective("all-reduce", ports=4), "needs group"),
    (lambda: lower_collective("reduce", group=(0, 1), ports=4), "needs root"),
    (lambda: lower_collective("broadcast", group=(0, 1), root=2, ports=4), "not in the group"),
    (lambda: lower_collective("all-gather", group=(0, 1), root=0, ports=4), "takes no root"),
    (lambda: lower_collective("permutation", pairs=[(0, 1), (0, 2)], ports=4), "source port 0"),
    (lambda: lower_collective("unicast", pairs=[(0, 1), (2, 1)], ports=4), "destination port 1"),
    (lambda: lower_collective("unicast", pairs=[(0,)], ports=4), "not \\(src, dst\\)"),
    (lambda: lower_collective("unicast", group=(0, 1), ports=4), "takes pairs"),
])
def test_bad_arguments(call, message):
    with pytest.raises(FredError, match=message):
        call()
