"""The online unicast router's reference model (hdl/compiler/online_routing.py): paths realised by
the golden functional model, strict-sense non-blocking at m >= 3, blocking possible at m = 2."""

import random

import pytest

from hdl.compiler.functional import symbolic
from hdl.contracts.errors import FredError
from hdl.compiler.online_routing import OnlineRoutingModel


def _check(router: OnlineRoutingModel):
    outputs, problems = symbolic(router.config(), present=list(router.paths.values()))
    assert problems == []
    expected = [router.paths.get(o) for o in range(router.ports)]
    assert outputs == expected


@pytest.mark.parametrize("ports", [2, 3, 4, 5, 6, 8, 12, 16])
def test_random_connect_release_never_blocks_at_m3(ports):
    """Random unicast requests between a free input and a free output, interleaved with
    releases, always route at m = 3 and the configuration realises exactly the paths."""
    rng = random.Random(ports)
    router = OnlineRoutingModel(ports, 3)
    for _ in range(400):
        busy_out = set(router.paths)
        busy_in = set(router.paths.values())
        free_in = [p for p in range(ports) if p not in busy_in]
        free_out = [p for p in range(ports) if p not in busy_out]
        if free_in and (not busy_out or rng.random() < 0.6):
            src, dst = rng.choice(free_in), rng.choice(free_out)
            assert router.route(src, dst) is not None, (src, dst, router.paths)
        else:
            dst = rng.choice(sorted(busy_out))
            src = router.paths[dst]
            assert router.release(dst) == src
        _check(router)


def test_full_permutations_route_at_m3():
    rng = random.Random(1)
    for ports in (4, 7, 8):
        for _ in range(50):
            router = OnlineRoutingModel(ports, 3)
            perm = list(range(ports))
            rng.shuffle(perm)
            for src, dst in enumerate(perm):
                assert router.route(src, dst) is not None
            _check(router)
            for dst in rng.sample(range(ports), ports):
                router.release(dst)
            assert router.config().to_int() == 0


def test_m2_can_block():
    """m = 2 is not strict-sense non-blocking: after these paths, input 0 and output 1 are
    free but in[0]'s free link is to middle 0 and out[0]'s free link is from middle 1.
    The model reports None and changes nothing."""
    router = OnlineRoutingModel(4, 2)
    assert router.route(0, 0) == [0]
    assert router.route(1, 3) == [1]
    assert router.release(0) == 0
    assert router.route(2, 0) == [0]
    before = router.config().to_int()
    assert router.route(0, 1) is None
    assert router.config().to_int() == before and router.paths == {3: 1, 0: 2}
    # the same requests at m = 3 route
    router = OnlineRoutingModel(4, 3)
    for src, dst in ((0, 0), (1, 3)):
        router.route(src, dst)
    router.release(0)
    router.route(2, 0)
    assert router.route(0, 1) == [2]


def test_errors():
    router = OnlineRoutingModel(4, 3)
    router.route(0, 1)
    with pytest.raises(FredError, match="output 1 already"):
        router.route(2, 1)
    with pytest.raises(FredError, match="input 0 already"):
        router.route(0, 2)
    with pytest.raises(FredError, match="no path"):
        router.release(3)
    with pytest.raises(FredError, match="port in 0..3"):
        router.route(4, 0)
