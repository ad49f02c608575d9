"""Functional model and checker: arithmetic order, missing operands, detection of wrong
configurations (mutations), numeric checks in every dtype."""

import random

import numpy as np
import pytest

from hdl.contracts.errors import FredError
from hdl.compiler import (Flow, InputMode, OutputMode, RDMode, Router, SwitchConfig, check_config,
                          check_numeric, layout, parse_flows, simulate, symbolic, verify_config)
from hdl.compiler.functional import evaluate, leaves
from hdl.compiler.routability import random_flow_set, random_partition, partition_flows
from hdl.contracts.dtypes import get_dtype


def _fred2_4_allreduce():
    # ports 0,1 reduce at in[0]; port 2 enters mid[0] at sub-port 1 via in[1];
    # mid[0].rd sums (in0 = (0+1), in1 = 2) and broadcasts; out[0] and out[1] take wire 0.
    return SwitchConfig.from_modes(4, 2, {
        "in[0]": InputMode(1, 0, 1, 0, 1), "in[1]": InputMode(in0_en=1, in0_wire=0),
        "mid[0].rd": RDMode(3, 3), "out[0]": OutputMode(1, 0, 1, 0), "out[1]": OutputMode(1, 0)})


def test_symbolic_tree_and_order():
    config = _fred2_4_allreduce()
    trees, problems = symbolic(config)
    assert problems == []
    assert trees[:3] == [("+", ("+", 0, 1), 2)] * 3 and trees[3] is None
    flows = [Flow((0, 1, 2), (0, 1, 2))]
    assert check_config(config, flows) == []


def test_simulate_adds_in_tree_order_fp16():
    config = _fred2_4_allreduce()
    fp16 = get_dtype("fp16")
    # (big + -big) + small != big + (-big + small) in fp16: the order is observable.
    a, b, c = fp16.from_float([4096.0, -4096.0, 1.0])
    out = simulate(4, 2, config, "fp16", [a, b, c, None])
    assert out[0] == out[1] == out[2] == fp16.add(fp16.add(a, b), c)
    assert fp16.to_float(out[0]) == 1.0
    assert fp16.to_float(fp16.add(a, fp16.add(b, c))) != 1.0  # the other tree differs
    assert out[3] is None


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32", "int32"])
def test_simulate_matches_tree_random_data(dtype):
    rng = np.random.default_rng(1)
    router = Router(ports=16, middle=3)
    dt = get_dtype(dtype)
    for seed in range(10):
        phase = router.route(random_flow_set(16, random.Random(seed))).phases[0]
        config, flows = phase.config, phase.flows
        inputs = [dt.random_bits(rng, (8,)) for _ in range(16)]
        out = simulate(16, 3, config, dtype, inputs)
        trees, problems = symbolic(config)
        assert problems == []
        for port, tree in enumerate(trees):
            if tree is None:
                assert out[port] is None
            else:
                assert np.array_equal(out[port], evaluate(tree, dt, inputs))
        assert check_numeric(config, flows, dtype=dtype, rng=rng) == []


def test_simulate_accepts_words_and_checks_sizes():
    config = _fred2_4_allreduce()
    out = simulate(4, 2, config.encode(), "int32", [1, 2, 3, 4])
    assert [None if o is None else int(o) for o in out] == [6, 6, 6, None]
    with pytest.raises(FredError, match="Fred_2\\(4\\), not Fred_3\\(4\\)"):
        simulate(4, 3, config, "int32", [1, 2, 3, 4])
    with pytest.raises(FredError, match="expected data for 4 ports"):
        simulate(4, 2, config, "int32", [1, 2, 3])


def test_missing_operand_raises():
    config = _fred2_4_allreduce()
    with pytest.raises(FredError, match=r"mid\[0\]\.rd: configured to add in0 \+ in1 but in1"):
        simulate(4, 2, config, "int32", [1, 2, None, None])
    trees, problems = symbolic(config, present=[0, 1])
    assert any("carries no data" in p for p in problems)


def test_checker_reports_wrong_and_lost_data():
    config = _fred2_4_allreduce()
    problems = check_config(config, [Flow((0, 1), (0, 1, 2))])
    assert any("extra" in p for p in problems)
    problems = check_config(config, [Flow((0, 1, 2), (0, 1))])
    assert any("output 2 is in no flow" in p for p in problems)
    lossy = SwitchConfig.from_modes(4, 2, {"in[0]": InputMode(in0_en=1, in0_wire=1)})
    assert any("no output takes" in p for p in check_config(lossy, [Flow((3,), (3,))]))
    with pytest.raises(FredError, match="does not realise"):
        verify_config(lossy, [Flow((3,), (3,))])


def _mutate(config, rng):
    slots = layout(config.ports, config.middle)
    index = rng.randrange(len(slots))
    kind = slots[index].kind
    cls = {"input": InputMode, "output": OutputMode, "rd": RDMode}[kind]
    while True:
        try:
            mode = cls.unpack(rng.randrange(1 << slots[index].width), config.middle)
            mode.check(config.middle)
        except FredError:
            continue
        if mode != config.modes[index]:
            break
    modes = list(config.modes)
    modes[index] = mode
    return SwitchConfig(config.ports, config.middle, tuple(modes))


@pytest.mark.parametrize("ports,middle", [(8, 2), (8, 3), (16, 3), (32, 4)])
def test_checker_catches_every_effective_mutation(ports, middle):
    """A mutated configuration either still delivers exactly the same trees everywhere with
    nothing lost (a change inside an unused part), or the checker reports a problem."""
    rng = random.Random(ports + middle)
    router = Router(ports=ports, middle=middle)
    caught = 0
    for trial in range(60):
        flows = partition_flows(random_partition(ports, rng)) if trial % 2 else random_flow_set(ports, rng)
        result = router.route(flows)
        phase = result.phases[0]
        mutated = _mutate(phase.config, rng)
        problems = check_config(mutated, phase.flows)
        same = symbolic(mutated) == symbolic(phase.config)
        assert problems or same
        caught += bool(problems)
    assert caught > 15  # many mutations land in idle subnetworks and change nothing


def test_parse_roundtrip_of_checked_flows():
    flows = parse_flows("0,1,2>0,1,2; 3>4,5")
    config, _ = Router(ports=8, middle=3).try_one_phase(flows)
    assert [sorted(leaves(t).elements()) if t is not None else None
            for t in symbolic(config)[0]] == [[0, 1, 2]] * 3 + [None, [3], [3], None, None]
