"""The mesh rows of fabric-validate (studies/mesh_validation.py) from stored rows, no Verilator:
the row of a run mesh case, the speedups paired by case and size, and the block between the
mesh markers (the FRED block and the text around are kept)."""

from types import SimpleNamespace

import pytest

from studies.fabric_validation import BEGIN, END, FabricValidationRow, summarise
from studies.mesh_validation import (MESH_BEGIN, MESH_END, mesh_validation_row, speedup_rows,
                                     write_mesh_validation)


def row(fabric, case, size, model, rtl):
    return FabricValidationRow(fabric, case, size, "ring", model, model - 3, 3.0, 0.0, 0, "x", rtl,
                               rtl / model, 100, 1e5)


def test_mesh_row_reads_a_real_case_and_program():
    """A real case (the model's side, nothing built) and the real engine program; only the RTL's
    cycle count is made up."""
    from hdl.compiler.mesh_program import mesh_program
    from studies.mesh_case import build_mesh_case
    case = build_mesh_case(op="all-reduce", size=40, group="wafer")
    program = mesh_program(case.spec, case.groups, 40, algorithm=case.estimate.algorithm, split=case.split)
    case.rtl = SimpleNamespace(cycles=222, cycles_per_s=2e4, program=program)
    r = mesh_validation_row("wafer all-reduce", case)
    assert (r.fabric, r.algorithm, r.rtl_cycles) == ("mesh", "hierarchical-2d", 222)
    assert r.model_latency_cycles == pytest.approx(case.estimate.cycles - case.estimate.bandwidth_cycles)
    # every NPU receives 1.9 x 40 flits (tests/sysmodel/test_mesh_rtl_model.py's 1.9 S), 20 NPUs
    assert r.flits_checked == program.recv_total == 20 * 76
    assert r.ratio == pytest.approx(222 / case.estimate.cycles)


def test_io_load_row_reads_a_real_case_and_program():
    """fabric-validate's 40-flit io-load: 3-flit stripes from 18 controllers (54 flits per NPU),
    the model's split trees; only the RTL's cycle count is made up."""
    from hdl.compiler.mesh_io_program import io_load_program
    from studies.mesh_case import build_mesh_case
    from studies.mesh_validation import MESH_CASES
    label, request = next((label, r) for label, r in MESH_CASES if r["op"] == "io-load")
    case = build_mesh_case(size=40, **request)
    case.rtl = SimpleNamespace(cycles=120, cycles_per_s=2e4, program=io_load_program(case.io, 3, case.mode))
    r = mesh_validation_row(label, case)
    assert (r.case, r.algorithm, r.size_flits) == ("wafer io-load", "tree-split", 54)
    assert r.flits_checked == 20 * 54
    assert r.model_bandwidth_cycles == pytest.approx(8.5 * 3 * 4)


def test_speedups_pair_mesh_and_fred_rows_of_the_same_case_and_size():
    rows = [row("mesh", "wafer all-reduce", 4000, 16000.0, 16020),
            row("fred-d", "wafer all-reduce", 4000, 4000.0, 4005),
            row("fred-d", "wafer all-reduce", 40, 100.0, 100),          # no mesh row at 40
            row("mesh", "MP2-DP5-PP2 DP all-reduce", 4000, 25600.0, 25613)]
    (wafer,) = speedup_rows(rows)   # the DP row has no Fred-X partner
    rtl, model, paper = wafer["speedups"]["fred-d"]
    assert rtl == pytest.approx(16020 / 4005) and model == pytest.approx(4.0) and paper == 4.0


def test_block_goes_between_its_markers_only(tmp_path):
    rows = [row("mesh", "wafer all-reduce", 4000, 16000.0, 18870),
            row("mesh", "MP2-DP5-PP2 MP all-reduce", 40, 163.0, 164),
            row("fred-a", "wafer all-reduce", 4000, 15233.0, 15232)]
    doc = tmp_path / "v.md"
    doc.write_text(f"# kept\n\n{BEGIN}\nfred table\n{END}\n\n{MESH_BEGIN}\nold\n{MESH_END}\n\nkept too\n")
    write_mesh_validation(summarise(rows, "fred fabric-validate --fabrics fred-a,mesh"), doc)
    text = doc.read_text()
    assert "fred table" in text and "old" not in text and text.endswith(MESH_END + "\n\nkept too\n")
    assert "**1/2 cases** agree within 5%; the worst is wafer all-reduce at 4000 flits" in text
    assert "| 18870 | 1.179 **!** |" in text
    assert "| wafer all-reduce | 4000 | 18870 | 1.24 / 1.05 / 1.25 |" in text


def test_fred_io_model_is_the_uplink_bound_by_hand():
    """Fred-B with 18 controllers (4, 4, 4, 3, 3 on the five L1s), 4014 flits per NPU = 223-flit
    stripes: L1 3's one uplink (1/2 flit per cycle) carries down the stripes of the 15
    controllers on the other L1s, 15 x 223 = 3,345 flits = 6,690 cycles, plus the hops."""
    from studies.mesh_validation import fred_io_model_cycles
    cycles = fred_io_model_cycles("fred-b", 4014)
    assert 2 * 15 * 223 <= cycles < 2 * 15 * 223 + 100


@pytest.mark.parametrize("fabric", ["fred-c", "fred-d"])
def test_fred_c_and_d_io_models_are_the_controller_bound_by_hand(fabric):
    """Fred-C/D with 18 controllers need the Fred_3(12) int32 L1 (4 NPUs, 4 uplinks, 4
    controller ports; measured 2026-11-26 19:30): their uplinks keep up (4 ports per L1), so
    every controller's link is the busiest, its 223-flit stripe at 16/375 flit per cycle =
    5,226.6 cycles, plus the hops (Fred-C's chain through 20 members: more)."""
    from dataclasses import replace

    from hdl.contracts.fabric import fabric_spec, make_request
    from sysmodel.fabric_model import model_cycles
    spec = replace(fabric_spec(fabric), io_controllers=18)
    for op in ("io-broadcast", "io-reduce"):
        est = model_cycles(spec, make_request(spec, op=op, size_flits=4014, group="wafer"))
        assert est.bandwidth_cycles == pytest.approx(223 * 375 / 16)
        assert 223 * 375 / 16 < est.cycles < 223 * 375 / 16 + 500


def test_the_io_case_gets_model_and_paper_speedups_without_fred_rtl():
    from studies.mesh_validation import fred_io_model_cycles
    rows = [row("mesh", "wafer io-load", 4014, 7606.0, 7700), row("fred-b", "wafer all-reduce", 4014, 8033.0, 8032)]
    (io,) = speedup_rows(rows)
    rtl, model, paper = io["speedups"]["fred-b"]
    assert rtl is None and paper == pytest.approx(1152 / 750)
    assert model == pytest.approx(7606.0 / fred_io_model_cycles("fred-b", 4014))
    # no Fred-X rows at all: the four variants' model and paper ratios
    (io,) = speedup_rows(rows[:1])
    assert sorted(io["speedups"]) == ["fred-a", "fred-b", "fred-c", "fred-d"]


def test_io_store_row_pairs_with_the_fred_models_io_reduce():
    """fabric-validate's 40-flit io-store: the same 3-flit stripes and split trees as io-load,
    its model latency the reducing members' and the controllers' paced flit
    (tests/sysmodel/test_mesh_io_model.py: 177.4375 = 102 + 52 + 375/16); its Fred-X model
    ratio is against the FRED model's io-reduce with 18 controllers."""
    from hdl.compiler.mesh_io_program import io_store_program
    from studies.mesh_case import STORE_MAX_STRIPE, build_mesh_case
    from studies.mesh_validation import MESH_CASES, fred_io_model_cycles
    label, request = next((label, r) for label, r in MESH_CASES if r["op"] == "io-store")
    case = build_mesh_case(size=40, **request)
    case.rtl = SimpleNamespace(cycles=150, cycles_per_s=2e4,
                               program=io_store_program(case.io, 3, case.mode, max_stripe=STORE_MAX_STRIPE))
    r = mesh_validation_row(label, case)
    assert (r.case, r.algorithm, r.size_flits) == ("wafer io-store", "tree-split", 54)
    assert (r.model_bandwidth_cycles, r.model_cycles) == pytest.approx((102, 102 + 52 + 375 / 16))
    assert r.flits_checked == 18 * 3    # each controller's stripe, every flit a sum of 20 NPUs
    (store,) = speedup_rows([r])
    rtl, model, paper = store["speedups"]["fred-b"]
    assert rtl is None and paper == pytest.approx(1152 / 750)
    assert model == pytest.approx(r.model_cycles / fred_io_model_cycles("fred-b", 54, op="io-reduce"))


def test_a_striped_io_run_gives_the_io_row_its_fred_rtl_cell():
    """Fred-A's striped weight streaming (a made-up run: the cycles of the 2026-11-26 Verilator
    run at 54 flits) pairs with the mesh's io-load row: RTL cell = mesh RTL / Fred-A RTL, model
    cell = mesh model / Fred-A model on the platform the striped RTL runs on, the packet
    fabric's (483.3 cycles: the controllers' 3 paced flits, 70.3, + the chain's 413 with the
    packet switches' input buffers; 453.3 on the circuit platform: session 13,
    tests/sysmodel/test_controller_lead.py), the row within 5 % or not by its own ratio."""
    from studies.mesh_validation import fred_io_model_cycles, stripe_io_row
    fred = stripe_io_row("fred-a", "wafer io-load", 54, {"done": True, "problems": [], "cycles": 468,
                                                         "cycles_per_s": 3e3})
    assert (fred.rtl_cycles, fred.flits_checked) == (468, 20 * 54)
    assert fred.model_cycles == pytest.approx(fred_io_model_cycles("fred-a", 54, switch="packet"))
    assert fred.model_cycles == pytest.approx(fred_io_model_cycles("fred-a", 54) + 30)
    assert fred.ratio == pytest.approx(468 / fred.model_cycles)
    assert fred.within == (abs(fred.ratio - 1) <= 0.05)
    (io,) = speedup_rows([row("mesh", "wafer io-load", 54, 126.0, 130), fred])
    rtl, model, paper = io["speedups"]["fred-a"]
    assert rtl == pytest.approx(130 / 468) and model == pytest.approx(126.0 / fred.model_cycles)


def test_a_striped_reduce_out_gives_the_io_store_row_its_fred_rtl_cell():
    """Fred-C's striped reduce-out (a made-up run of 480 cycles) pairs with the mesh's io-store
    row: its model is the packet platform's io-reduce (the same chains reversed: 3 x 375/16 +
    the chain's 413 = 483.3), the RTL cell mesh RTL / Fred-C RTL, the model cell mesh model /
    that model."""
    from studies.mesh_validation import fred_io_model_cycles, stripe_io_row
    fred = stripe_io_row("fred-c", "wafer io-store", 54, {"done": True, "problems": [], "cycles": 480,
                                                          "cycles_per_s": 3e3})
    assert fred.model_cycles == pytest.approx(fred_io_model_cycles("fred-c", 54, op="io-reduce", switch="packet"))
    assert fred.model_cycles == pytest.approx(3 * 375 / 16 + 413)
    (store,) = speedup_rows([row("mesh", "wafer io-store", 54, 177.4, 168), fred])
    rtl, model, paper = store["speedups"]["fred-c"]
    assert rtl == pytest.approx(168 / 480) and model == pytest.approx(177.4 / fred.model_cycles)
    assert paper == pytest.approx(1152 / 750)


def test_a_striped_io_run_with_a_problem_makes_no_row():
    from hdl.contracts.errors import FredError
    from studies.mesh_validation import stripe_io_row
    with pytest.raises(FredError, match="NPU 3: lost"):
        stripe_io_row("fred-a", "wafer io-load", 54, {"done": True, "problems": ["NPU 3: lost"],
                                                      "cycles": 468, "cycles_per_s": 3e3})
