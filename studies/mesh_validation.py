"""The 2D-mesh rows of ``fred fabric-validate``: the paper's Fig. 9 cases on the RTL
mesh (docs/mesh_rtl.md) against the model of the same mesh, and the speedups measured entirely
in RTL (mesh RTL cycles / Fred-X RTL cycles) beside the model's and the paper's, written into
``docs/fabric_validation.md`` between the fabric-validate-mesh markers.

The rows are :class:`~studies.fabric_validation.FabricValidationRow` (fabric ``mesh``), so the
summary and its tolerance are the FRED fabrics' (:func:`studies.fabric_validation.summarise`).
The I/O cases are weight streaming (``io-load``) from the 18 edge controllers to every NPU
(``fred_mesh_io``, docs/mesh_rtl.md "I/O controllers on the mesh") and the gradient reduce-out
(``io-store``) from every NPU into them (``fred_mesh_io_store``), with the model's trees.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hdl.contracts.fabric import FABRICS
from studies.fabric_validation import FabricValidation, FabricValidationRow
from studies.report import Column, Markdown, replace_marked_block

__all__ = ["MESH_CASES", "MESH_BEGIN", "MESH_END", "PAPER_SPEEDUP", "IO_CASES", "STRIPE_IO_FABRICS", "mesh_validation_row",
           "fred_io_model_cycles", "stripe_io_row", "speedup_rows", "mesh_markdown_block", "write_mesh_validation"]

#: (label, request arguments of ``studies.mesh_case.build_mesh_case``): the labels are the
#: FRED cases' (``studies.fabric_validation.CASES``), so the speedup table pairs them
MESH_CASES = (
    ("wafer all-reduce", dict(op="all-reduce", group="wafer")),
    ("MP2-DP5-PP2 MP all-reduce", dict(op="all-reduce", strategy="MP2-DP5-PP2", dim="mp")),
    ("MP2-DP5-PP2 DP all-reduce", dict(op="all-reduce", strategy="MP2-DP5-PP2", dim="dp")),
    ("MP2-DP5-PP2 PP multicast", dict(op="multicast", strategy="MP2-DP5-PP2", dim="pp")),
    ("wafer io-load", dict(op="io-load", group="wafer")),
    ("wafer io-store", dict(op="io-store", group="wafer")),
)
MESH_BEGIN, MESH_END = "<!-- fabric-validate-mesh:begin -->", "<!-- fabric-validate-mesh:end -->"

#: The paper's mesh time / Fred-X time per case (shared spec FRED.md sec. 4, Fig. 9: effective
#: bandwidths per NPU, with the traffic Fred-B/D save): wafer mesh 1500 GBps against Fred-A
#: 1875, Fred-B 1500 with half the traffic, Fred-C 3000, Fred-D 3000 with half; MP 750 against
#: 3000 everywhere; DP 750 against 375, "~mesh" with 37.5 % less traffic (1.6), 3000, 3000 with
#: 37.5 % less (6.4); PP multicast 750 against 3000 everywhere.
PAPER_SPEEDUP = {
    "wafer all-reduce": {"fred-a": 1.25, "fred-b": 2.0, "fred-c": 2.0, "fred-d": 4.0},
    "MP2-DP5-PP2 MP all-reduce": {"fred-a": 4.0, "fred-b": 4.0, "fred-c": 4.0, "fred-d": 4.0},
    "MP2-DP5-PP2 DP all-reduce": {"fred-a": 0.5, "fred-b": 1.6, "fred-c": 4.0, "fred-d": 6.4},
    "MP2-DP5-PP2 PP multicast": {"fred-a": 4.0, "fred-b": 4.0, "fred-c": 4.0, "fred-d": 4.0},
    # I/O (FRED.md sec. 1 and Table "GPT-3"): the mesh's hottest link needs (2 x 5 - 1) x 128 =
    # 1,152 GBps and has 750, so its controllers stream at 750 / 1,152 = 0.65 of FRED's 128 GBps;
    # the reduce-out loads the same links the other way
    "wafer io-load": {f: 1152 / 750 for f in ("fred-a", "fred-b", "fred-c", "fred-d")},
    "wafer io-store": {f: 1152 / 750 for f in ("fred-a", "fred-b", "fred-c", "fred-d")},
}
#: The I/O cases and the FRED RTL's op of each: their FRED side is modelled only
#: (:func:`fred_io_model_cycles`): the FRED RTL's I/O ops give each group one controller, the
#: mesh's io-load and io-store run all 18 at once (the programs of that request are built,
#: ``hdl.compiler.io_stripe_program`` and ``io_stripe_trees``; the engines and, on Fred-B/D,
#: the switch are not: docs/fabric_rtl.md, "Striped I/O: every controller at once")
IO_CASES = {"wafer io-load": "io-broadcast", "wafer io-store": "io-reduce"}


def mesh_validation_row(label: str, case) -> FabricValidationRow:
    """The row of a :class:`~studies.mesh_case.MeshCase` the RTL has run (the mesh has no
    switch phases; its busiest link is named by its load in flits)."""
    est, rtl = case.estimate, case.rtl
    return FabricValidationRow(
        fabric="mesh", case=label, size_flits=case.size_flits, algorithm=est.algorithm,
        model_cycles=float(est.cycles), model_bandwidth_cycles=float(est.bandwidth_cycles),
        model_latency_cycles=float(est.cycles - est.bandwidth_cycles), model_phase_cycles=0.0,
        model_phases=0, busiest_link=f"{est.busiest_link_flits:.1f} flits",
        rtl_cycles=int(rtl.cycles), ratio=float(case.ratio),
        flits_checked=int(rtl.program.recv_total), cycles_per_s=float(rtl.cycles_per_s))


def fred_io_model_cycles(fabric: str, size_flits: int, *, controllers: int = 18, op: str = "io-broadcast",
                         characterization=None, switch: str = "circuit") -> float | None:
    """The model's cycles for weight streaming (``op`` io-broadcast; io-reduce: the gradient
    reduce-out) of ``size_flits`` per NPU from (into) ``controllers`` I/O controllers (each a
    stripe) on the platform of the ``fabric`` RTL with that many
    controllers (``sysmodel.fabric_model``: controller k on L1 k mod 5, at 128 GBps) and
    ``switch``'s switches (``packet``: the packet fabric's, whose input VC buffer every
    traversal adds, the platform of the striped RTL, :func:`stripe_io_row`); None when
    the characterization lacks the L1 switch that platform needs (Fred-C/D's Fred_3(12) int32:
    4 NPUs, 4 uplinks and 4 controllers)."""
    from dataclasses import replace

    from hdl.contracts.errors import FredError
    from hdl.contracts.fabric import fabric_spec, make_request
    from sysmodel.fabric_model import fabric_platform, model_cycles
    spec = replace(fabric_spec(fabric), io_controllers=controllers)
    # the model stripes an I/O op's group over every controller of the platform
    request = make_request(spec, op=op, size_flits=size_flits, group="wafer")
    try:
        platform = fabric_platform(spec, characterization=characterization, switch=switch)
        return model_cycles(spec, request, platform=platform).cycles
    except FredError as error:
        if "has no measured" not in str(error):
            raise
        return None


#: The Fred-X whose RTL runs the mesh's I/O request (every controller's stripe at once,
#: docs/fabric_rtl.md "Striped I/O"), and the cases it runs: Fred-A/C's chains, weight
#: streaming and reduce-out (``StripeNpu`` adds its own data to every flit it forwards; its
#: started stripe leaves a bubble in the NPU ring and is paced to its controller since session
#: 13, when it stopped stalling on the wafer: docs/fabric_validation.md, "The striped
#: reduce-out on the wafer"); Fred-B/D's weight streaming and reduce-out, their 18 trees served
#: as shared stored flows (docs/fabric_rtl.md, "Fred-B's weight streaming and reduce-out on the
#: fabric"; Fred-D's switches store 9 slots, its header a 4-bit phase:
#: ``hdl.compiler.io_stripe_shared.fabric_shared_phases``)
STRIPE_IO_FABRICS = {fabric: ("wafer io-load", "wafer io-store") for fabric in FABRICS}


@dataclass
class StripeIoCase:
    """A Fred-X I/O case run as the striped request at the mesh case's size (``fred
    fabric-validate`` with the mesh: the RTL side of the speedup table's I/O rows)."""

    fabric: str
    label: str
    size_flits: int
    characterization: object = None

    def run_row(self) -> FabricValidationRow:
        """Run it under Verilator (a build of the fabric with its controllers) and make its row:
        Fred-A/C's chains, Fred-B/D's trees as shared stored flows."""
        spec, program, run, *_ = self._runner()
        return stripe_io_row(self.fabric, self.label, self.size_flits, run(spec, program),
                             characterization=self.characterization)

    def top_key(self) -> tuple:
        """What the Verilog of the top it runs on depends on (cases with equal keys share one
        build; ``fred fabric-validate --plan``)."""
        spec, program, _, key, _ = self._runner()
        return key(spec, program)

    def build(self):
        """The Verilated model it runs on, built or found in the cache (``fred fabric-validate
        --jobs``: made ahead; the run then finds it)."""
        from cocotb_tests.fabric.stripe_io_run import build_striped_top
        spec, program, _, key, top = self._runner()
        return build_striped_top(top(spec, program), key(spec, program))

    def _runner(self):
        """``(spec, program, run, top_key, top)``, the last three functions of ``(spec,
        program)``: Fred-A/C's chains, Fred-B/D's trees as shared stored flows."""
        from hdl.contracts.fabric import fabric_spec
        spec = fabric_spec(self.fabric, io_controllers=18)
        if spec.in_switch:
            from cocotb_tests.fabric.shared_io_run import run_shared_io, shared_io_top, shared_top_key
            from hdl.compiler.io_stripe_shared import shared_io_program
            return (spec, shared_io_program(spec, IO_CASES[self.label], self.size_flits),
                    run_shared_io, shared_top_key, shared_io_top)
        from cocotb_tests.fabric.stripe_io_run import run_stripe_io, stripe_io_top, stripe_top_key
        from hdl.compiler.io_stripe_program import io_stripe_program
        return (spec, io_stripe_program(spec, IO_CASES[self.label], self.size_flits), run_stripe_io,
                stripe_top_key, stripe_io_top)


def stripe_io_row(fabric: str, label: str, size_flits: int, run: dict, *, characterization=None) -> FabricValidationRow:
    """The Fred-X row of an I/O case run as the striped request (``run``:
    :func:`cocotb_tests.fabric.stripe_io_run.run_stripe_io`'s result, every NPU checked) at the
    mesh case's ``size_flits``, against :func:`fred_io_model_cycles`; it pairs with the mesh row
    of the same case and size in :func:`speedup_rows`. A run with problems is an error naming
    them (no row is made of a run that lost or corrupted a flit)."""
    from hdl.contracts.errors import FredError
    from hdl.contracts.fabric import fabric_spec
    if not run["done"] or run["problems"]:
        raise FredError(f"{fabric} {label} at {size_flits} flits: the striped I/O run failed: "
                        f"{'; '.join(run['problems'][:5]) or 'not done'}")
    # the striped request runs on the packet fabric: its model is the packet platform's
    model = fred_io_model_cycles(fabric, size_flits, op=IO_CASES[label], characterization=characterization,
                                 switch="packet")
    return FabricValidationRow(
        fabric=fabric, case=label, size_flits=size_flits,
        algorithm="in-switch" if fabric_spec(fabric).in_switch else "chain", model_cycles=float(model),
        model_bandwidth_cycles=float("nan"), model_latency_cycles=float("nan"), model_phase_cycles=0.0,
        model_phases=0, busiest_link="", rtl_cycles=int(run["cycles"]), ratio=run["cycles"] / model,
        flits_checked=fabric_spec(fabric).npus * size_flits, cycles_per_s=float(run["cycles_per_s"]))


def speedup_rows(rows, *, characterization=None) -> list[dict]:
    """For every mesh row with Fred-X rows of the same case and size among ``rows``: the mesh
    cycles over each Fred-X's, in RTL and in the model, beside the paper's
    (:data:`PAPER_SPEEDUP`; None where the paper has no figure). The I/O cases (:data:`IO_CASES`)
    have no Fred-X RTL: its cells are (None, the model's ratio or None, the paper's) for every
    Fred-X of ``rows`` (all four when ``rows`` has none)."""
    fred = {(r.fabric, r.case, r.size_flits): r for r in rows if r.fabric != "mesh"}
    fabrics = sorted({f for f, _, _ in fred}) or sorted(PAPER_SPEEDUP["wafer io-load"])
    out = []
    for mesh in (r for r in rows if r.fabric == "mesh"):
        cells = {}
        for fabric in fabrics:
            other = fred.get((fabric, mesh.case, mesh.size_flits))
            if other is not None:
                cells[fabric] = (mesh.rtl_cycles / other.rtl_cycles, mesh.model_cycles / other.model_cycles,
                                 PAPER_SPEEDUP.get(mesh.case, {}).get(fabric))
            elif mesh.case in IO_CASES:
                model = fred_io_model_cycles(fabric, mesh.size_flits, op=IO_CASES[mesh.case],
                                             characterization=characterization)
                cells[fabric] = (None, None if model is None else mesh.model_cycles / model,
                                 PAPER_SPEEDUP[mesh.case][fabric])
        if cells:
            out.append({"case": mesh.case, "size_flits": mesh.size_flits, "mesh_rtl": mesh.rtl_cycles,
                        "speedups": cells})
    return out


_COLUMNS = (
    Column("case", "case"), Column("flits", "size_flits", rule="---:"),
    Column("algorithm", "algorithm"),
    Column("model cycles (busiest link + latency)",
           lambda r: f"{r.model_cycles:.1f} ({r.model_bandwidth_cycles:.0f} + {r.model_latency_cycles:.0f})",
           rule="---:"),
    Column("RTL cycles", "rtl_cycles", rule="---:"),
    Column("RTL/model", lambda r: f"{r.ratio:.3f}" + ("" if r.within else " **!**"), rule="---:"),
    Column("flits checked", "flits_checked", rule="---:"),
    Column("RTL cycles/s", lambda r: f"{r.cycles_per_s:,.0f}", rule="---:"),
)


def _speedup_cell(cell) -> str:
    return " / ".join("-" if v is None else f"{v:.2f}" for v in cell)


def mesh_markdown_block(result: FabricValidation, *, characterization=None) -> str:
    """The block between the mesh markers: the run, the agreement, the mesh table and the
    speedup table (RTL / model / paper per Fred-X: the Fig. 9 cases when the run had Fred-X
    rows too, the I/O case's model and paper ratios always)."""
    mesh = [r for r in result.cases if r.fabric == "mesh"]
    within = sum(r.within for r in mesh)
    worst = max(mesh, key=lambda r: abs(r.ratio - 1))
    doc = Markdown().raw(MESH_BEGIN).paragraph(
        f"Generated by `{result.command}` on {result.date} ({result.host}). The RTL mesh against "
        f"the model of the same mesh: **{within}/{len(mesh)} cases** agree within "
        f"{result.tolerance:.0%}; the worst is {worst.case} at {worst.size_flits} flits "
        f"(RTL/model {worst.ratio:.3f}).")
    doc.table(_COLUMNS, mesh)
    if not any(r.fabric != "mesh" for r in result.cases):
        doc.paragraph("No Fred-X rows in this run: `fred fabric-validate` with the FRED fabrics "
                      "as well writes the speedups measured in RTL here.")
    speedups = speedup_rows(result.cases, characterization=characterization)
    fabrics = sorted({f for s in speedups for f in s["speedups"]})
    if speedups:
        doc.paragraph("Speedups over the mesh, mesh cycles / Fred-X cycles: **RTL** (both sides "
                      "measured in this run) / **model** (each on the platform of its RTL) / "
                      "**paper** (Fig. 9; I/O: 1,152 / 750, the paper's hotspot).")
        columns = (Column("case", "case"), Column("flits", "size_flits", rule="---:"),
                   Column("mesh RTL cycles", "mesh_rtl", rule="---:"),
                   *(Column(f"{f} RTL / model / paper",
                            (lambda s, f=f: _speedup_cell(s["speedups"][f]) if f in s["speedups"] else "-"))
                     for f in fabrics))
        doc.table(columns, speedups)
    if any(s["case"] in IO_CASES for s in speedups):
        measured = sorted({f"{f} {s['case']}" for s in speedups if s["case"] in IO_CASES
                           for f, cell in s["speedups"].items() if cell[0] is not None})
        doc.paragraph(f"{' and '.join(IO_CASES)}: the mesh's request is 18 controllers at once, each a "
                      "stripe to (from) every NPU. Fred-X RTL figures: "
                      f"{', '.join(measured) if measured else 'none'} (the striped request on the packet "
                      "fabric: every controller's stripe on its own chain, Fred-A/C's weight streaming and "
                      "reduce-out; Fred-B/D's on 18 trees served as shared stored flows, Fred-D's switches "
                      "storing 9 slots named by a 4-bit phase: docs/fabric_rtl.md, \"Striped I/O: every "
                      "controller at once\"). "
                      "The model's ratio is the mesh model over the model of the Fred-X RTL's "
                      "platform with 18 controllers (controller k on L1 k mod 5; the packet fabric's "
                      "where the Fred-X has an RTL row, the circuit fabric's elsewhere); '-' where the run's "
                      "characterization has no L1 switch for that platform (Fred-C/D: Fred_3(12) "
                      "int32).")
    doc.blank().raw(MESH_END)
    return "\n".join(doc.lines)


def write_mesh_validation(result: FabricValidation, output: Path, *, characterization=None) -> None:
    """The mesh block in ``output`` (between its markers, keeping the text around them; the
    document is created if missing); ``characterization``: the switch timings the run's model
    used (the I/O case's Fred-X model ratios)."""
    replace_marked_block(output, MESH_BEGIN, MESH_END,
                         mesh_markdown_block(result, characterization=characterization),
                         new_document_head="# The fabric RTL against the system model\n\n")
