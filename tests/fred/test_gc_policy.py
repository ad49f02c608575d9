"""The command process's collector policy (fred/gc_policy.py): survivors frozen at checkpoints,
cyclic garbage still collected, the state restored, and the library setting nothing itself."""

from __future__ import annotations

import ast
import gc
import weakref
from pathlib import Path

import pytest

from fred.gc_policy import survivors_frozen

ROOT = Path(__file__).resolve().parents[2]


class _Node:
    """A self-referencing object: only the cyclic collector can free it."""

    def __init__(self):
        self.me = self


def _cycle() -> weakref.ref:
    return weakref.ref(_Node())


@pytest.fixture(autouse=True)
def _nothing_frozen():
    # the policy's restore is only defined from an unfrozen state; leave it as found
    if gc.get_freeze_count():
        pytest.skip("objects are already frozen in this process")
    yield
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize("enabled", [True, False])
def test_state_restored_after_the_context(enabled):
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with survivors_frozen() as checkpoint:
            assert gc.get_freeze_count() > 0          # entering froze what was alive
            checkpoint()
            assert gc.isenabled() is enabled
        assert gc.get_freeze_count() == 0
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_restored_also_when_the_body_raises():
    with pytest.raises(RuntimeError):
        with survivors_frozen():
            raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0


def test_garbage_made_inside_is_collected_before_each_freeze():
    with survivors_frozen() as checkpoint:
        ref = _cycle()                 # cyclic garbage already: unreachable, not yet freed
        assert ref() is not None
        checkpoint()                   # the collection before the freeze frees it
        assert ref() is None


def test_an_object_alive_at_a_checkpoint_is_frozen_until_the_context_ends():
    with survivors_frozen() as checkpoint:
        node = _Node()
        ref = weakref.ref(node)
        checkpoint()                   # alive: frozen
        del node                       # now cyclic garbage, but frozen
        gc.collect()
        assert ref() is not None       # frozen objects are never collected...
    gc.collect()
    assert ref() is None               # ...until the context unfreezes them


def test_keep_frozen_collects_and_freezes_once_more_and_unfreezes_nothing():
    try:
        with survivors_frozen(keep_frozen=True) as checkpoint:
            checkpoint()
            garbage = _cycle()         # left by the last step: freed on exit, not frozen
            node = _Node()             # alive on exit: frozen with the rest
        assert garbage() is None
        assert gc.get_freeze_count() > 0
        assert not any(o is node for o in gc.get_objects())   # the permanent generation is not listed
    finally:
        gc.unfreeze()


def test_an_earlier_freeze_is_not_undone():
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        with survivors_frozen():
            pass
        assert gc.get_freeze_count() >= before
    finally:
        gc.unfreeze()


def test_checkpoint_stands_in_for_a_progress_tick():
    with survivors_frozen() as checkpoint:
        checkpoint(3)                  # tick(n) is called with the number of steps


def test_the_library_sets_no_collector_policy():
    """sysmodel and studies never freeze nor change thresholds: the policy is the command's."""
    banned = {"freeze", "unfreeze", "set_threshold", "callbacks"}
    found = []
    for package in ("sysmodel", "studies"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Attribute) and node.attr in banned
                        and isinstance(node.value, ast.Name) and node.value.id == "gc"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} gc.{node.attr}")
    assert not found, found


def test_a_command_called_in_process_leaves_the_collector_as_found(capsys):
    """`fred validate` called with an argv (as here, inside a longer process) freezes at each
    case and unfreezes at its end; the `fred` script (argv None) would keep them frozen."""
    from fred.cli import main
    freezes = []
    real = gc.freeze

    def counting():
        freezes.append(1)
        real()

    gc.freeze = counting
    try:
        status = main(["validate", "--json", "--only", "megatron-22b/seqsel"])   # one small case
    finally:
        gc.freeze = real
    capsys.readouterr()
    assert status == 0
    assert len(freezes) >= 2           # on entering, and after the case
    assert gc.get_freeze_count() == 0
