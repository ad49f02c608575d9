"""studies.background_work: a call in a forked child, its answer (or its exception) handed back,
and what the child is given but must not read; fred eval's steps run that way compute and
write what they did in process (docs/sysmodel.md, Speed, twenty-sixth increment)."""

from __future__ import annotations

import os
import time

import pytest

from hdl.contracts.errors import FredError
from studies.background_work import ForkedCall, NotYetComputed, can_fork, not_yet

pytestmark = pytest.mark.skipif(not can_fork(), reason="needs fork and two CPUs")

STATE = {"seen": "before"}


def _pid_and_state(x: float) -> tuple:
    """The child's pid, what it saw of the parent's state, a float computed there; then it
    changes the state (in its own copy)."""
    seen = STATE["seen"]
    STATE["seen"] = "changed in the child"
    return os.getpid(), seen, x / 3.0 + 1e-17


def _raise_fred(message: str):
    raise FredError(message)


def _die(code: int):
    os._exit(code)


def _unpicklable():
    return lambda: None


def _sleep(seconds: float):
    time.sleep(seconds)


def test_the_child_computes_from_the_parent_state_at_the_fork_and_hands_the_value_back_exactly():
    STATE["seen"] = "set before the fork"
    call = ForkedCall(_pid_and_state, 0.1).start()
    STATE["seen"] = "set after the fork"
    pid, seen, value = call.result()
    assert pid != os.getpid()                   # computed elsewhere ...
    assert seen == "set before the fork"        # ... from the copy made at the fork
    assert value == 0.1 / 3.0 + 1e-17           # the float itself, bit for bit
    assert STATE["seen"] == "set after the fork"   # the child's change stays there


def test_in_process_runs_at_start_here():
    STATE["seen"] = "here"
    call = ForkedCall(_pid_and_state, 0.2, in_background=False).start()
    assert STATE["seen"] == "changed in the child"   # ran at start, in this process
    assert call.result()[0] == os.getpid()


@pytest.mark.parametrize("in_background", [True, False])
def test_the_childs_exception_is_raised_again_with_its_traceback(in_background):
    call = ForkedCall(_raise_fred, "bad strategy 7", in_background=in_background).start()
    with pytest.raises(FredError, match="bad strategy 7") as info:
        call.result()
    notes = getattr(info.value, "__notes__", [])
    assert (any("_raise_fred" in n and "background process" in n for n in notes)
            if in_background else not notes)


def test_a_child_that_dies_without_answering_is_named():
    with pytest.raises(FredError, match=r"_die ended without an answer \(exit code 3\)"):
        ForkedCall(_die, 3).start().result()


def test_an_answer_that_cannot_be_sent_back_is_an_error():
    with pytest.raises(FredError, match="_unpicklable's answer cannot be sent back"):
        ForkedCall(_unpicklable).start().result()


def test_abandon_stops_the_child():
    call = ForkedCall(_sleep, 60.0).start()
    process = call._process
    start = time.monotonic()
    call.abandon()
    assert not process.is_alive() and process.exitcode != 0 and time.monotonic() - start < 30
    call.abandon()   # twice: nothing left to stop


def test_a_value_not_yet_computed_refuses_every_read():
    later = not_yet("uncertainty")
    assert isinstance(later, NotYetComputed)
    for read in (lambda: list(later), lambda: len(later), lambda: bool(later), lambda: later[0],
                 lambda: later.intervals, lambda: float(later), lambda: later == [],
                 lambda: next(b for b in later if b)):
        with pytest.raises(FredError, match="'uncertainty' was read in a background process"):
            read()
    with pytest.raises(TypeError):
        hash(later)


def test_the_sweep_plot_reads_only_the_sweeps(tmp_path):
    """What the sweeps' child is given (the sweeps, every other field not yet computed) draws the
    plot the whole result draws, byte for byte; a field it is not given is refused."""
    import dataclasses

    from studies import evaluation as ev
    rows = {f"{w}/{f}": [ev.SweepRow(strategy="MP1-DP2-PP10", feasible=True, time_s=2.0,
                                     time_per_sample_s=0.025, notes="", rank=1),
                         ev.SweepRow(strategy="MP2-DP1-PP10", feasible=f == "fred-d", time_s=1.5,
                                     time_per_sample_s=0.0375, notes="", rank=2)]
            for w, f in ev.SWEPT}
    partial = ev._partial_result(sweep=rows)
    assert isinstance(partial.uncertainty, NotYetComputed) and partial.sweep is rows
    ev._plot_sweeps(tmp_path / "partial.png", partial)
    whole = dataclasses.replace(partial, **{f.name: None for f in dataclasses.fields(partial)
                                            if f.name != "sweep"})
    ev._plot_sweeps(tmp_path / "whole.png", whole)
    assert (tmp_path / "partial.png").read_bytes() == (tmp_path / "whole.png").read_bytes()
    with pytest.raises(FredError, match="'iterations' was read"):
        ev._plot_breakdown(tmp_path / "breakdown.png", partial)


@pytest.mark.full
def test_eval_with_background_steps_writes_what_it_writes_in_process(tmp_path):
    """fred eval's files with the sweeps and three plots in children equal the files written all
    in this process: every CSV, report.md and PNG byte for byte, results.json but its wall
    times (about 15 s)."""
    import json

    from studies.evaluation import run_evaluation
    from studies.uncertainty import DEFAULT_SAMPLES
    for mode in (True, False):
        run_evaluation(tmp_path / str(mode), progress=False, calibration_mode="paper",
                       uncertainty_samples=DEFAULT_SAMPLES, background=mode)
    names = sorted(p.name for p in (tmp_path / "True").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "False").iterdir())
    assert {"sweep.png", "breakdown.png", "sensitivity.png", "speedup.png", "report.md"} <= set(names)

    def timeless(x):
        if isinstance(x, dict):
            return {k: timeless(v) for k, v in x.items() if k not in ("eval_s", "elapsed_s")}
        return [timeless(v) for v in x] if isinstance(x, list) else x
    for name in names:
        a, b = ((tmp_path / mode / name).read_bytes() for mode in ("True", "False"))
        if name == "results.json":
            assert timeless(json.loads(a)) == timeless(json.loads(b))
        else:
            assert a == b, name
