"""``fred fabric-sim`` announces the fabric's Verilog generation (10-40 s before any build or
cache look-up) with the build-step lines of eda.toolchain.build_step, once per hardware and
process (memoised). The generator itself is replaced by a stand-in: this pins the lines, not
the Verilog (tests/hdl/designs/test_fabric_rtl.py covers that)."""

from __future__ import annotations

import re

import hdl.emit.verilog
from cocotb_tests.fabric import run
from hdl.contracts.fabric import fabric_spec


def _stand_in(calls):
    def to_verilog(design, *, name, **_):
        design._MustUse__silence = True     # not elaborated here, on purpose (no Amaranth warning)
        calls.append(name)
        return f"module {name}; endmodule\n"
    return to_verilog


def test_the_lock_step_parts_generation_prints_a_start_and_a_done_line_once(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(hdl.emit.verilog, "to_verilog", _stand_in(calls))
    monkeypatch.setattr(run, "_VERILOG", {})
    spec = fabric_spec("fred-a")
    parts = run.part_verilogs(spec)
    assert len(parts) == 2 and len(calls) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == ("build: fabric fred-a: generating the Verilog of the lock-step simulator's "
                      "two parts ...")
    assert re.fullmatch(r"build: fabric fred-a: generating the Verilog of the lock-step simulator's "
                        r"two parts done in \d+\.\d s", err[1])
    assert run.part_verilogs(spec) == parts                     # memoised: no second generation,
    assert len(calls) == 2 and capsys.readouterr().err == ""    # no second announcement


def test_the_single_model_generation_prints_its_lines(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(hdl.emit.verilog, "to_verilog", _stand_in(calls))
    monkeypatch.setattr(run, "_VERILOG", {})
    run.fabric_verilog(fabric_spec("fred-d"))
    err = capsys.readouterr().err.splitlines()
    assert calls == [run.TOP] and len(err) == 2
    assert err[0] == "build: fabric fred-d: generating the Verilog ..."
    assert err[1].startswith("build: fabric fred-d: generating the Verilog done in ")
