"""The judge of a mesh weight-streaming run (cocotb_tests/fabric/mesh_io_run.py) names what went
wrong from the counters the bench reads; no Verilator here."""

from cocotb_tests.fabric.mesh_io_run import judge_io
from hdl.compiler.mesh_io_program import io_load_program
from hdl.contracts.mesh import MeshFabricSpec
from hdl.contracts.mesh_io import MeshIoSpec

SPEC = MeshIoSpec(mesh=MeshFabricSpec(rows=2, cols=2), controllers=8, queue_depth=64)


def _after(program):
    npus = [dict(received=program.expect, errors=0, first_error=0, complete=1, idle=1) for _ in range(4)]
    controllers = [dict(sent=program.stripe_flits, done=1) for _ in range(8)]
    after = {"npus": npus, "controllers": controllers, "global": dict(protocol_error=0)}
    return after


def test_a_clean_run_has_no_errors():
    program = io_load_program(SPEC, 5)
    assert judge_io(program, _after(program), stalled=False) == []


def test_a_stall_names_the_npus_short_of_their_flits():
    program = io_load_program(SPEC, 5)
    after = _after(program)
    after["npus"][2]["received"] = program.expect - 1
    errors = judge_io(program, after, stalled=True)
    assert "did not finish before the watchdog" in errors[0] and "NPUs [2]" in errors[0]
    assert f"NPU 2: received {program.expect - 1} of {program.expect}" in errors[1]


def test_bad_flits_overflow_and_short_controllers_are_reported():
    program = io_load_program(SPEC, 5)
    after = _after(program)
    after["npus"][1].update(errors=2, first_error=7)
    after["controllers"][3]["sent"] = 4
    after["global"]["protocol_error"] = 1
    errors = judge_io(program, after, stalled=False)
    assert any("credit protocol" in e for e in errors)
    assert any(e.startswith("controller 3: sent 4 of 5") for e in errors)
    assert any("NPU 1" in e and "2 bad flit(s), first bad arrival #7" in e for e in errors)
