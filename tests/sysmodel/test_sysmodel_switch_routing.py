"""The adapter between the system model and the configuration compiler."""

from sysmodel.switch_routing import phases_for


def test_hierarchical_all_reduce_at_an_l1_is_one_phase():
    # 4 NPU ports reduce up to the uplink (port 4); the uplink broadcasts down to them; on the
    # L1 chiplet Fred_3(12) and on a power-of-two Fred_3(16) alike
    for ports in (12, 16):
        assert phases_for(ports, 3, (((0, 1, 2, 3), (4,)), ((4,), (0, 1, 2, 3)))) == 1


def test_flows_sharing_an_output_are_serialised():
    assert phases_for(12, 3, (((0,), (4,)), ((1,), (4,)))) == 2
    assert phases_for(12, 3, (((0,), (4,)), ((1,), (4,)), ((2,), (4,)), ((3,), (5,)))) == 3
