"""``fred fabric-validate --switch packet --io``: the I/O cases on the packet fabric, the runs
each case takes (int32 at --sizes, fp16 at the smallest with sink backpressure), refusals
listed with their reason, and the block between its own markers (pure Python: the RTL runs are
replaced by rows made here; the Verilator runs are make fabric-validate's)."""

from __future__ import annotations

import pytest

from fred.cli import build_parser, main
from studies.fabric_validation import (IO_CASES, IO_FP16_BACKPRESSURE, MARKERS, FabricValidationRow,
                                       io_variants, markdown_block, summarise)


def _args(*extra):
    return build_parser("fabric-validate", every=False).parse_args(
        ["fabric-validate", "--switch", "packet", "--io", *extra])


def test_io_variants_are_int32_at_every_size_and_fp16_at_the_smallest_under_backpressure():
    assert io_variants((40, 4000)) == [("int32", 40, 0.0), ("int32", 4000, 0.0),
                                       ("fp16", 40, IO_FP16_BACKPRESSURE)]
    assert io_variants((4000, 400), "fp16") == [("fp16", 400, IO_FP16_BACKPRESSURE)]
    # a --backpressure given applies to every run, fp16's included
    assert io_variants((40,), None, 0.1) == [("int32", 40, 0.1), ("fp16", 40, 0.1)]
    from hdl.contracts.errors import FredError
    with pytest.raises(FredError, match="int32 and fp16; got --dtype bf16"):
        io_variants((40,), "bf16")


def test_io_cases_cover_every_case_and_run_or_list_each_with_its_reason():
    """Every fabric x I/O case x run is either built (modelled, validated) or refused with a
    reason: none is dropped. Fred-B's DP groups are built (their slots agree at every switch)
    with the four groups' phases in turn; every row keeps the run's backpressure."""
    from fred.commands.fabric_validate import _fabrics, _io_cases
    args = _args("--fabrics", "fred-b,fred-d", "--sizes", "40,4000")
    cases, refused = _io_cases(args, _fabrics(args))
    assert len(cases) + len(refused) == 2 * len(IO_CASES) * 3
    assert all(why for *_, why in refused)
    built = {(c.spec.name, label, c.spec.dtype, c.request.size_flits): (c, bp) for label, c, _, bp in cases}
    for size in (40, 4000):
        case, bp = built[("fred-b", "MP2-DP5-PP2 DP io-broadcast", "int32", size)]
        assert case.estimate.algorithm == "in-switch" and case.estimate.phases == 4 and bp == 0.0
    fp16 = [bp for (_, _, dtype, size), (_, bp) in built.items() if dtype == "fp16"]
    assert all(bp == IO_FP16_BACKPRESSURE for bp in fp16)
    assert {size for (_, _, dtype, size) in built if dtype == "fp16"} <= {40}
    # a refused run names the case and its format
    assert all(label.endswith((" int32", " fp16")) for _, label, _, _ in refused)


def _row(fabric="fred-b", case="wafer io-reduce", dtype="int32", backpressure=0.0, ratio=1.0):
    return FabricValidationRow(fabric=fabric, case=case, size_flits=40, algorithm="in-switch",
                               model_cycles=1000.0, model_bandwidth_cycles=937.5,
                               model_latency_cycles=31.0, model_phase_cycles=31.5, model_phases=1,
                               busiest_link="l1.0->io0", rtl_cycles=round(1000 * ratio), ratio=ratio,
                               flits_checked=40, cycles_per_s=1.0, dtype=dtype,
                               sink_backpressure=backpressure)


def test_the_io_block_has_its_own_markers_and_the_runs_format_and_backpressure(tmp_path):
    result = summarise([_row(), _row(dtype="fp16", backpressure=0.3, ratio=1.1)],
                       "fred fabric-validate --switch packet --io")
    text = markdown_block(result, tmp_path / "p.png", tmp_path / "doc.md", "packet-io",
                          refused=[("fred-a", "wafer io-reduce fp16", 40, "no measured Fred_3(6) fp16")])
    begin, end = MARKERS["packet-io"]
    assert text.startswith(begin) and text.endswith(end)
    assert MARKERS["packet"][0] not in text
    assert "| fabric | case | flits | data | NPU sink backpressure | algorithm |" in text
    assert "| fred-b | wafer io-reduce | 40 | fp16 | 0.3 | in-switch |" in text
    assert "**1/2 cases**" in text and "1.100 **!**" in text
    assert "fred-a wafer io-reduce fp16 at 40 flits (no measured Fred_3(6) fp16)" in text


def test_validate_io_writes_its_block_and_leaves_the_others(tmp_path, monkeypatch):
    """The command end to end with the RTL runs replaced (``_run`` returns a row made from the
    case's model): the I/O block written between its markers, the packet block's text kept,
    the plot beside the document; the options it needs."""
    import fred.commands.fabric_validate as fv
    from studies.fabric_validation import MARKERS as M
    doc = tmp_path / "doc.md"
    kept = f"{M['packet'][0]}\nthe Fig. 9 block\n{M['packet'][1]}\n"
    doc.write_text("# head\n\n" + kept)

    def fake_run(label, case, row_of, args, backpressure=None):
        return _row(case.spec.name, label, case.spec.dtype, backpressure or 0.0)

    monkeypatch.setattr(fv, "_run", fake_run)
    assert main(["fabric-validate", "--switch", "packet", "--io", "--fabrics", "fred-d", "--sizes", "40",
                 "--dtype", "int32", "--output", str(doc)]) == 0
    text = doc.read_text()
    assert kept in text and M["packet-io"][0] in text and M["packet-io"][1] in text
    assert "`fred fabric-validate --fabrics fred-d --sizes 40 --dtype int32 --switch packet --io --seed 0`" in text
    assert text.count("| fred-d |") == len(IO_CASES)
    assert (tmp_path / "doc_packet_io.png").is_file()


def test_io_needs_the_packet_switch_and_is_not_concurrent(capsys):
    assert main(["fabric-validate", "--io", "--fabrics", "fred-d", "--no-write"]) == 1
    assert "--io runs on the packet fabric" in capsys.readouterr().err
    assert main(["fabric-validate", "--switch", "packet", "--io", "--concurrent", "--fabrics", "fred-d",
                 "--no-write"]) == 1
    assert "two blocks" in capsys.readouterr().err
