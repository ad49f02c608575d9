"""The training-iteration table of ``fred fabric-iteration --table`` (``make fabric-iteration``):
the cases the fabric RTL runs as whole iterations (docs/fabric_iteration.md), RTL against the
model of the same fabric, and the FRED/mesh speedup measured in RTL beside the model's and the
paper's, written into ``docs/fabric_validation.md`` between the fabric-iteration markers.

Both FRED fabrics: every case runs on the circuit FRED fabric (the reference: it runs them
all) and, in a section of its own, on the packet FRED fabric (``--switch packet``, the paper's
switch) where its iteration runs the case; the cases the packet fabric's iteration refuses
before any build are named there with the refusal. The speedup over the mesh takes the packet
row of a FRED fabric where there is one (the paper's switch), else the circuit row, and says
which.

Scale: every case is the model's serialised iteration (``--no-overlap``) at ``scale`` (bytes
and compute divided by it) on the RTL fabrics' own platforms; the paper's speedups are of the
full-size, overlapped iteration, so they are quoted for reference, not as a target.
"""

from __future__ import annotations

import datetime
import os
import platform as host
from pathlib import Path

from studies.report import Column, Markdown, replace_marked_block

__all__ = ["ITERATION_CASES", "PACKET_FABRICS", "PAPER_SPEEDUP", "ITERATION_BEGIN", "ITERATION_END", "iteration_row",
           "speedups", "iteration_markdown_block", "write_iteration_table"]

#: The FRED fabrics a case can also run on with packet switches (``--switch packet``; the mesh
#: has no FRED switch).
PACKET_FABRICS = ("fred-a", "fred-b", "fred-c", "fred-d")
_FABRICS = ("mesh", *PACKET_FABRICS)
#: (workload, strategy, fabrics, scale K or None for the command's, samples per DP replica or
#: None for the command's, packet fabrics) the RTL runs: ``fabrics`` on the mesh and the
#: circuit FRED fabric, ``packet fabrics`` again on the packet FRED fabric (its own section;
#: the variants whose RTL cannot run the case are named with the refusal). One DP
#: all-reduce per NPU; the wafer-wide MP all-reduces of each layer, many per NPU (the NPUs
#: load a program per collective; on the circuit FRED fabric the switches rerun their phases
#: with each collective's counts). resnet-152 MP20 twice: at K = 1000 its 104 all-reduces are
#: 1-51 flits, where whole-flit pieces cost more than the bytes (docs/fabric_iteration.md), at
#: K = 100 63-502 flits (rings on Fred-A/C for the larger ones: the case that found the NPUs
#: taking a next collective's early flits between collectives, docs/fabric_iteration.md).
#: MP4-DP5: MP and DP together, MP groups of 4 consecutive ports (one L1 switch each on
#: FRED), DP groups of 5 (one NPU per L1), one collective at a time (``one_collective``).
#: gpt-3 MP1-DP20 with 8 samples per replica: weight streaming (io-load) and gradient
#: reduce-out (io-store) from the 18 I/O controllers: on the mesh (its edge controllers) and on
#: the packet FRED fabric (the circuit one has no controllers), where Fred-A/C run the striped
#: chains behind the trace and Fred-B/D are refused naming what their switches lack; 8 samples
#: keep the activations (no checkpoint spills), K = 10,000 keeps the stripes within the NPUs'
#: forwarding queues and the run within minutes on the mesh (docs/fabric_iteration.md, "Weight
#: streaming"; the packet I/O top's build and run take far longer: "The packet FRED fabric's
#: I/O iteration"). transformer-1t MP1-DP20 at K = 100,000 (96 s at 55,000 cycles/s):
#: weight streaming and checkpoint spills; its spills are under a flit per controller, moved
#: as whole 1-flit stripes, so its row shows what that rounding costs against the model's
#: exact bytes (2026-11-26: iteration 1.181, I/O 2.590; the RTL 1.030 of the model of the
#: whole stripes it moves); on the packet fabric its spills are refused by name. gpt-3 with
#: spills at K = 10,000 (1.005 / 1.038) takes 151 s: not listed.
ITERATION_CASES = (
    ("resnet-152", "MP1-DP20-PP1", _FABRICS, None, None, PACKET_FABRICS),
    ("resnet-152", "MP20-DP1-PP1", _FABRICS, None, None, PACKET_FABRICS),
    ("resnet-152", "MP20-DP1-PP1", _FABRICS, 100.0, None, PACKET_FABRICS),
    ("transformer-17b", "MP20-DP1-PP1", _FABRICS, None, None, PACKET_FABRICS),
    ("resnet-152", "MP4-DP5-PP1", _FABRICS, None, None, PACKET_FABRICS),
    ("transformer-17b", "MP4-DP5-PP1", _FABRICS, None, None, PACKET_FABRICS),
    ("gpt-3", "MP1-DP20-PP1", ("mesh",), 10_000.0, 8, PACKET_FABRICS),
    ("transformer-1t", "MP1-DP20-PP1", ("mesh",), 100_000.0, None, PACKET_FABRICS),
)
#: The paper's end-to-end training speedups over the mesh (shared spec FRED.md, "Results to
#: reproduce": full size, overlapped, the paper's strategies -- GPT-3's MP2-DP5-PP2, not the
#: table's MP1-DP20-PP1).
PAPER_SPEEDUP = {"resnet-152": {"fred-c": 1.41, "fred-d": 1.76},
                 "transformer-17b": {"fred-c": 1.75, "fred-d": 1.87},
                 "gpt-3": {"fred-c": 1.34, "fred-d": 1.34},
                 "transformer-1t": {"fred-c": 1.4, "fred-d": 1.4}}
ITERATION_BEGIN, ITERATION_END = "<!-- fabric-iteration:begin -->", "<!-- fabric-iteration:end -->"


def iteration_row(case) -> dict:
    """One table row of a run :class:`studies.iteration_case.IterationCase`."""
    model, rtl = case.model, case.rtl_figures
    exposed_model = sum(model["comm_exposed_cycles"].values())
    exposed_rtl = sum(rtl["comm_exposed_cycles"].values())
    stall = max(case.rtl.load_stall.values()) if case.rtl.load_stall else 0
    return {"workload": f"{case.description.split(' 1f1b')[0]}, K = {case.scale:g}", "fabric": case.fabric,
            "switch": "-" if case.fabric == "mesh" else case.switch,
            "collectives": len(case.request) if isinstance(case.request, list) else int(case.request is not None),
            "model_iteration": model["iteration_cycles"], "rtl_iteration": rtl["iteration_cycles"],
            "iteration_ratio": rtl["iteration_cycles"] / model["iteration_cycles"],
            "model_exposed": exposed_model, "rtl_exposed": exposed_rtl,
            "exposed_ratio": exposed_rtl / exposed_model if exposed_model else None,
            "load_stall": stall, "cycles_per_s": case.rtl.cycles_per_s, "sim_s": case.rtl.sim_s,
            "flits": case.rtl.flits_received}


def speedups(rows) -> list[dict]:
    """Per workload with a mesh row and Fred-X rows: mesh / Fred-X iteration, RTL and model;
    a Fred-X's packet row (``switch`` ``packet``: the paper's switch) where it has one, else its
    circuit row (a row without ``switch`` is a circuit one)."""
    out = []
    for workload in dict.fromkeys(r["workload"] for r in rows):
        mine: dict = {}
        for r in rows:
            if r["workload"] == workload and (r["fabric"] not in mine or r.get("switch") == "packet"):
                mine[r["fabric"]] = r
        mesh = mine.get("mesh")
        if mesh is None or len(mine) < 2:
            continue
        name = workload.split()[0]
        for fabric, r in mine.items():
            if fabric != "mesh":
                rtl = mesh["rtl_iteration"] / r["rtl_iteration"]
                model = mesh["model_iteration"] / r["model_iteration"]
                out.append({"workload": workload, "fabric": fabric, "switch": r.get("switch", "circuit"),
                            "rtl": rtl, "model": model, "ratio": rtl / model,
                            "paper": PAPER_SPEEDUP.get(name, {}).get(fabric)})
    return out


def _ratio(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def _measured(row) -> str:
    """When the row was measured (UTC, to the minute), and ``stored`` for a row the run took
    from the row store (studies.iteration_rows)."""
    when = row.get("measured")
    if when is None:
        return "this run"
    return when[:16] + (", stored" if row.get("stored") else "")


_COLUMNS = (
    Column("iteration (serialised, scale K)", "workload"), Column("fabric", "fabric"),
    Column("collectives / NPU", "collectives", rule="---:"),
    Column("model cycles", "model_iteration", ".1f", rule="---:"),
    Column("RTL cycles", "rtl_iteration", rule="---:"), Column("RTL/model", "iteration_ratio", _ratio, rule="---:"),
    Column("exposed comm model", "model_exposed", ".1f", rule="---:"),
    Column("exposed comm RTL", "rtl_exposed", rule="---:"), Column("RTL/model", "exposed_ratio", _ratio, rule="---:"),
    Column("program-load wait", "load_stall", rule="---:"),
    Column("RTL cycles/s", "cycles_per_s", lambda v: f"{v:,.0f}", rule="---:"),
    Column("measured (UTC)", _measured),
)
_SPEEDUP_COLUMNS = (
    Column("iteration", "workload"), Column("Fred-X", "fabric"), Column("switches", "switch"),
    Column("mesh/Fred-X RTL", "rtl", ".4f", rule="---:"), Column("model", "model", ".4f", rule="---:"),
    Column("RTL/model", "ratio", ".4f", rule="---:"),
    Column("paper (full size, overlapped)", "paper", lambda v: "-" if v is None else f"{v:g}", rule="---:"),
)


def _worst(rows) -> str:
    """The worst iteration and exposed-communication RTL/model of ``rows``, in words."""
    if not rows:
        return "no case finished"
    worst = max(rows, key=lambda r: abs(r["iteration_ratio"] - 1))
    text = f"iteration worst RTL/model {worst['iteration_ratio']:.4f} ({worst['workload']}, {worst['fabric']})"
    exposed = [r for r in rows if r["exposed_ratio"] is not None]
    if exposed:
        w = max(exposed, key=lambda r: abs(r["exposed_ratio"] - 1))
        text += f"; exposed communication worst {w['exposed_ratio']:.4f} ({w['workload']}, {w['fabric']})"
    return text


def _not_run(doc: Markdown, failed, what: str) -> None:
    if failed:
        doc.paragraph(f"**{len(failed)} case(s) {what}** (no row above): "
                      + "; ".join(f"{f['workload']} on {f['fabric']}: {f['error']}" for f in failed) + ".")


def _provenance(rows, missing) -> str:
    """Which rows this run measured and which it took from the row store, and the cases with
    no row (``missing``: names, with why)."""
    stored = sorted(r["measured"] for r in rows if r.get("stored"))
    text = ""
    if stored:
        span = stored[0][:16] + ("" if stored[0][:16] == stored[-1][:16] else f" to {stored[-1][:16]}")
        text = (f" {len(rows) - len(stored)} row(s) measured in this run, {len(stored)} taken from the row "
                f"store with the fingerprint of this run's code, tools, traces and programs "
                f"(measured {span} UTC; the \"measured\" column).")
    if missing:
        text += (f" **{len(missing)} case(s) without a row** (not selected by `--only` and not in the "
                 f"store with this fingerprint): {'; '.join(missing)}.")
    return text


def iteration_markdown_block(rows, command: str, failed=(), refused=(), missing=()) -> str:
    """The block between the fabric-iteration markers: the run, the table of the mesh and
    circuit FRED rows, the cases that did not finish (``failed``: dicts of workload, fabric,
    error; ``switch`` ``packet`` for the packet fabric's), the packet fabric's rows (``switch``
    ``packet``) and the cases its iteration refuses before any build (``refused``, as
    ``failed``), the speedups (:func:`speedups`). A row's ``measured`` and ``stored`` (taken
    from the row store) are its "measured" cell; ``missing``: the cases without a row."""
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    where = f"{host.machine()}, {os.cpu_count()} CPUs, Python {host.python_version()}"
    circuit = [r for r in rows if r.get("switch") != "packet"]
    packet = [r for r in rows if r.get("switch") == "packet"]
    doc = Markdown().raw(ITERATION_BEGIN).paragraph(
        f"Generated by `{command}` on {date} ({where}). Whole training iterations on the fabric RTL "
        f"(every NPU runs the model's exported trace, one node and one collective at a time; "
        f"docs/fabric_iteration.md) against the model of the same fabric and schedule: {_worst(circuit)}"
        ". Serialised iterations: all communication is exposed. Every flit of every collective "
        f"checked.{_provenance(rows, missing)} The mesh and the circuit FRED fabric (phase sequencers):")
    if circuit:
        doc.table(_COLUMNS, circuit)
    _not_run(doc, [f for f in failed if f.get("switch") != "packet"], "did not finish")
    if packet or refused:
        doc.paragraph("The packet FRED fabric (`--switch packet`, the paper's switch: phases selected "
                      "by the packet headers, endpoint algorithms routed online; docs/fabric_iteration.md, "
                      f"\"The packet fabric\"), against the model's packet platform: {_worst(packet)}.")
        if packet:
            doc.table(_COLUMNS, packet)
        _not_run(doc, [f for f in failed if f.get("switch") == "packet"], "did not finish on the packet fabric")
        _not_run(doc, refused, "refused by the packet fabric's iteration before any build")
    table = speedups(rows)
    if table:
        doc.paragraph("Speedup over the mesh, mesh iteration / Fred-X iteration, both measured in RTL "
                      "(in this run or taken from the row store), beside the model's at the same scale; a Fred-X's packet row where "
                      "it has one, else its circuit row (switches); the paper's figure is the "
                      "full-size, overlapped iteration (a different scale: quoted, not a target).")
        doc.table(_SPEEDUP_COLUMNS, table)
    doc.blank().raw(ITERATION_END)
    return "\n".join(doc.lines)


def write_iteration_table(rows, output: Path, command: str, failed=(), refused=(), missing=()) -> None:
    """The block in ``output`` (between its markers, keeping the text around them)."""
    replace_marked_block(output, ITERATION_BEGIN, ITERATION_END,
                         iteration_markdown_block(rows, command, failed, refused, missing),
                         new_document_head="# The fabric RTL against the system model\n\n")
