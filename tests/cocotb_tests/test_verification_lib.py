"""The pure-Python parts of cocotb_tests.lib: scoreboard classification, generators, seeds, codec."""

import itertools
import random

import pytest

from cocotb_tests.lib import (TaggedScoreboard, Watchdog, WatchdogTimeout, bursts,
                              get_seed, never, random_idle)


def _board(**kwargs):
    board = TaggedScoreboard(**kwargs)
    board.expect(0, "a", 10)
    board.expect(0, "b", 11)
    board.expect(1, "c", 12)
    return board


def _kinds(board):
    return [error.kind for error in board.all_errors()]


def test_clean_run_passes_and_counts():
    board = _board()
    for port, tag, value in [(0, "a", 10), (1, "c", 12), (0, "b", 11)]:
        assert board.observe(port, tag, value) is None
    board.check()
    assert board.matched == 3 and board.outstanding == 0


@pytest.mark.parametrize("observations, kinds", [
    ([(0, "a", 10), (1, "c", 12)], ["loss"]),                                   # b never arrives
    ([(0, "a", 10), (0, "a", 10), (0, "b", 11), (1, "c", 12)], ["duplicate"]),
    ([(0, "a", 99), (0, "b", 11), (1, "c", 12)], ["corruption"]),               # wrong value
    ([(0, "a", 10), (0, "zz", 11), (0, "b", 11), (1, "c", 12)], ["corruption"]),  # unknown tag
    ([(0, "a", 10), (1, "b", 11), (1, "c", 12)], ["misroute", "loss"]),         # b went to port 1
])
def test_each_fault_kind_is_told_apart(observations, kinds):
    board = _board()
    for observation in observations:
        board.observe(*observation)
    assert _kinds(board) == kinds
    with pytest.raises(AssertionError, match=kinds[0]):
        board.check()


def test_reorder_only_when_ordered_and_not_for_a_mere_loss():
    board = _board(ordered=True)
    for observation in [(0, "b", 11), (0, "a", 10), (1, "c", 12)]:
        board.observe(*observation)
    assert _kinds(board) == ["reorder"]
    lossy = _board(ordered=True)
    for observation in [(0, "b", 11), (1, "c", 12)]:
        lossy.observe(*observation)
    assert _kinds(lossy) == ["loss"]
    unordered = _board()
    for observation in [(0, "b", 11), (0, "a", 10), (1, "c", 12)]:
        unordered.observe(*observation)
    assert _kinds(unordered) == []


def test_expecting_a_tag_twice_at_one_port_is_an_error():
    board = TaggedScoreboard()
    board.expect(0, 1, 5)
    with pytest.raises(ValueError, match="expected twice"):
        board.expect(0, 1, 6)


def test_watchdog_fires_only_with_outstanding_traffic():
    pending = [0]
    dog = Watchdog(5, lambda: pending[0])
    for cycle in range(20):
        dog.tick(cycle)          # nothing outstanding: never fires
    pending[0] = 3
    for cycle in range(4):
        dog.tick(cycle)
    dog.kick()
    for cycle in range(4):
        dog.tick(cycle)
    with pytest.raises(WatchdogTimeout, match="3 item"):
        dog.tick(99)


def test_generators():
    assert not any(itertools.islice(never(), 100))
    rng = random.Random(1)
    share = sum(itertools.islice(random_idle(rng, 0.25), 20000)) / 20000
    assert 0.22 < share < 0.28
    run = list(itertools.islice(bursts(random.Random(2), on=(3, 3), off=(2, 2)), 10))
    assert run == [False] * 3 + [True] * 2 + [False] * 3 + [True] * 2
    with pytest.raises(ValueError):
        next(random_idle(rng, 1.5))


def test_seeds_follow_fred_seed(monkeypatch):
    monkeypatch.setenv("FRED_SEED", "1234")
    assert get_seed("x") == get_seed("x") != get_seed("y")
    monkeypatch.setenv("FRED_SEED", "1235")
    first = get_seed("x")
    monkeypatch.setenv("FRED_SEED", "1234")
    assert get_seed("x") != first
    monkeypatch.setenv("FRED_SEED", "banana")
    with pytest.raises(ValueError, match="FRED_SEED"):
        get_seed("x")
