"""The reference engine's per-link limits as arrays (``engine_reference._limits``) against the
scalar rule they replace in the filling loop (``_limit``, kept as the specification).

docs/sysmodel.md, Speed, thirteenth increment: a Python call per link per filling step made the
reference loop about 10x slower on a GPU cluster's links; the array form must give every link
the same limit, bit for bit, including the boundary cases of each branch."""

import numpy as np
import pytest

from sysmodel.engine_reference import _EPS, _limit, _limits


def _bits(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).view(np.int64)


def _spec(capacity, use, moving, held) -> np.ndarray:
    return np.array([_limit(c, u, g, h) for c, u, g, h in zip(capacity, use, moving, held)],
                    dtype=np.float64)


def test_limits_hand_cases():
    # one link per branch: nothing moving (inf); a group moving past its fixed members
    # (capacity / (use + moving)); the fixed members bind (max(capacity - held, 0) / use);
    # a group alone (use 0): capacity / moving; fixed members over the capacity: 0
    capacity = np.array([1.0, 1.0, 0.5, 0.8, 0.2])
    use = np.array([0.0, 0.5, 0.5, 0.0, 0.5])
    moving = np.array([0.0, 0.5, 0.1, 0.4, 0.1])
    held = np.array([0.0, 0.2, 0.4, 0.3, 0.3])
    # link 1: 1 >= 0.5 * 0.2 / 0.5 + 0.2 = 0.4, so the group moves: 1 / (0.5 + 0.5) = 1
    # link 2: 0.5 >= 0.5 * 0.4 / 0.1 + 0.4 = 2.4 is false: (0.5 - 0.4) / 0.5
    # link 4: 0.2 >= 0.5 * 0.3 / 0.1 + 0.3 false: max(0.2 - 0.3, 0) / 0.5 = 0
    expected = [np.inf, 1.0, (0.5 - 0.4) / 0.5, 0.8 / 0.4, 0.0]
    assert _bits(_limits(capacity, use, moving, held)).tolist() == _bits(expected).tolist()
    assert _bits(_spec(capacity, use, moving, held)).tolist() == _bits(expected).tolist()


@pytest.mark.parametrize("seed", range(5))
def test_limits_equal_the_scalar_rule_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    n = 4000
    # values drawn to hit every branch and boundary: zeros of both signs, values at and around
    # the epsilon, capacities equal to the held use (capacity - held = +0.0), and the general case
    special = np.array([0.0, -0.0, _EPS, _EPS * (1 - 1e-9), _EPS * (1 + 1e-9), 1e-9, 0.5, 1.0])

    def column():
        general = rng.random(n) * rng.choice([1e-15, 1e-6, 1.0, 3.0], n)
        return np.where(rng.random(n) < 0.4, rng.choice(special, n), general)

    capacity, use, moving, held = column(), column(), column(), column()
    tie = rng.random(n) < 0.1
    capacity = np.where(tie, held, capacity)
    # the group's condition at equality: capacity == use * held / moving + held
    edge = (rng.random(n) < 0.1) & (moving > _EPS)
    capacity = np.where(edge, use * held / np.where(edge, moving, 1.0) + held, capacity)
    got = _limits(capacity, use, moving, held)
    want = _spec(capacity, use, moving, held)
    assert _bits(got).tolist() == _bits(want).tolist()
    # every branch was exercised
    assert np.isinf(want).any() and (want == 0.0).any() and np.isfinite(want).sum() > n // 2
