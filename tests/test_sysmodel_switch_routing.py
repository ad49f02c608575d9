"""The adapter between the system model and the configuration compiler."""

import pytest

from sysmodel import switch_routing
from sysmodel.switch_routing import phases_for


def test_uses_the_compiler_when_merged():
    pytest.importorskip("hdl.compiler")
    from hdl import compiler
    if not hasattr(compiler, "route"):
        pytest.skip("hdl.compiler.route not available")
    assert switch_routing.compiler_status() == "hdl.compiler.route"


def test_hierarchical_all_reduce_at_an_l1_is_one_phase():
    # 4 NPU ports reduce up to the uplink (port 4); the uplink broadcasts down to them
    assert phases_for(9, (((0, 1, 2, 3), (4,)), ((4,), (0, 1, 2, 3)))) == 1


def test_flows_sharing_an_output_are_serialised():
    assert phases_for(9, (((0,), (4,)), ((1,), (4,)))) == 2
    assert phases_for(9, (((0,), (4,)), ((1,), (4,)), ((2,), (4,)), ((3,), (5,)))) == 3


def test_fallback_without_compiler(monkeypatch):
    monkeypatch.setattr(switch_routing, "_HAVE_COMPILER", False)
    switch_routing.phases_for.cache_clear()
    try:
        assert "fallback" in switch_routing.compiler_status()
        assert phases_for(9, (((0,), (4,)), ((1,), (4,)))) == 2
        assert phases_for(9, (((0, 1), (2, 3)), ((4,), (5,)))) == 1
    finally:
        switch_routing.phases_for.cache_clear()
