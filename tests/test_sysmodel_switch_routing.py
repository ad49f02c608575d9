"""The adapter between the system model and the configuration compiler."""

from sysmodel.switch_routing import phases_for


def test_hierarchical_all_reduce_at_an_l1_is_one_phase():
    # 4 NPU ports reduce up to the uplink (port 4); the uplink broadcasts down to them
    assert phases_for(9, (((0, 1, 2, 3), (4,)), ((4,), (0, 1, 2, 3)))) == 1


def test_flows_sharing_an_output_are_serialised():
    assert phases_for(9, (((0,), (4,)), ((1,), (4,)))) == 2
    assert phases_for(9, (((0,), (4,)), ((1,), (4,)), ((2,), (4,)), ((3,), (5,)))) == 3

