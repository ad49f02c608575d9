"""``fred fabric-validate``: the paper's Fig. 9 collectives on the RTL fabrics Fred-A..D against
the system model, at a latency-bound and a bandwidth-bound size; writes the table and a plot
into docs/fabric_validation.md (docs/fabric_rtl.md; ``make fabric-validate``). ``mesh`` among
the fabrics adds the all-reduce cases on the RTL 2D mesh (docs/mesh_rtl.md) and the speedups
measured in RTL, in a block of their own (``studies.mesh_validation``); the FRED-only options
(--npu-latency, --uplink-latency, --simulator) do not apply to it. ``--switch packet`` runs
the FRED fabrics built of packet switches instead (``studies.packet_fabric_case``) into a block
and plot of their own beside the circuit one; ``--io`` with it, the I/O cases
(``studies.fabric_validation.IO_CASES``, int32 and fp16) into a third block."""

from __future__ import annotations

import argparse
from pathlib import Path

from fred.cli import print_json
from fred.commands._option_types import RANGES
from fred.commands.fabric_sim import add_fabric_arguments, spec_overrides

HELP = "the paper's Fig. 9 cases on the RTL fabrics Fred-A..D and the mesh vs the system model (writes docs)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fabrics", default=parser_default_fabrics(),
                        help=f"comma-separated fabrics (default {parser_default_fabrics()}; mesh: "
                             "the 2D-mesh baseline's all-reduce cases, docs/mesh_rtl.md)")
    parser.add_argument("--sizes", type=RANGES["flit_list"], default=(40, 4000), metavar="FLITS,...",
                        help="sizes in flits (default 40,4000: latency-bound and bandwidth-bound; "
                             "multiples of 40 split evenly into every ring's chunks)")
    parser.add_argument("--output", default=None,
                        help="Markdown file to write the table into (between its fabric-validate "
                             "markers, keeping the text around them; created if missing; default "
                             "docs/fabric_validation.md, with --json none unless given)")
    parser.add_argument("--plot", default=None,
                        help="PNG of RTL vs model (default: next to --output, same stem)")
    parser.add_argument("--no-write", action="store_true", help="print only; write no files")
    parser.add_argument("--switch", choices=("circuit", "packet"), default="circuit",
                        help="the FRED fabrics' switches: circuit (default; fred_switch with phase "
                             "sequencers) or packet (fred_packet_switch: phases selected by the "
                             "headers, rings and chains routed online; its own table and plot "
                             "beside the circuit one; --simulator does not apply, mesh neither)")
    parser.add_argument("--concurrent", action="store_true",
                        help="with --switch packet: the concurrent traffic-class scenarios "
                             "(fred fabric-sim --concurrent) on the packet fabrics among "
                             "--fabrics (Fred-A/C: online unicasts, each class on its VC) instead of the Fig. 9 cases, MP/PP at the smallest "
                             "size under the DP load at the largest, then all at the largest; "
                             "their own block of the document")
    parser.add_argument("--io", action="store_true",
                        help="with --switch packet: the I/O cases (io-broadcast and io-reduce, the "
                             "wafer's controller and the MP2-DP5-PP2 DP groups' four) instead of "
                             "the Fig. 9 cases: int32 at --sizes, fp16 at the smallest with random "
                             "NPU-sink backpressure (--dtype: one format only); their own block "
                             "(fabric-validate-packet-io) and plot")
    parser.add_argument("--plan", action="store_true",
                        help="print the cases and the distinct Verilated builds they need (what "
                             "each build is, how many cases share it), then stop: nothing is "
                             "generated, built or written")
    parser.add_argument("--jobs", type=RANGES["jobs"], default=1, metavar="N",
                        help="make the distinct builds ahead of the runs, N at a time (0: one per CPU; default 1: "
                             "each run builds its own; 2 on a 2-core machine overlaps one build's "
                             "single-threaded verilating with the other's compile); the same "
                             "builds, so the same cycles")
    add_fabric_arguments(parser)


def run(args) -> int:
    from dataclasses import replace

    from hdl.contracts.errors import FredError
    from studies.fabric_validation import TOLERANCE, summarise, write_fabric_validation
    from studies.report import check_writable, to_json_dict
    from fred.progress import progress_bar
    from fred.table import format_table
    fabrics = _fabrics(args)
    if not fabrics:
        print("fred fabric-validate --switch packet: no FRED fabric in --fabrics; nothing to run")
        return 0
    if args.concurrent and args.io:
        raise FredError("--concurrent and --io are two blocks: run them one at a time")
    if args.io and args.switch != "packet":
        raise FredError("--io runs on the packet fabric (the I/O controllers'): add --switch packet")
    if args.concurrent:
        from fred.commands._concurrent_validate import run_concurrent_validate
        return run_concurrent_validate(args, fabrics, _command(args))
    block = "packet-io" if args.io else args.switch
    output, plot = _output_paths(args, block)
    if not args.no_write:   # an unwritable document or plot fails before any build
        check_writable(output)
        check_writable(plot)
    # every case is validated and modelled before the first build
    cases, refused = _io_cases(args, fabrics) if args.io else _fred_cases(args, fabrics)
    if "mesh" in fabrics:
        cases += _mesh_cases(args) + _stripe_io_cases(args, fabrics)
    if not cases:   # every case refused: say why, write nothing (no row to summarise)
        for fabric, label, size, why in refused:
            print(f"not run on the packet fabric: {fabric} {label} at {size} flits: {why}")
        raise FredError("fred fabric-validate: every case was refused; nothing to run")
    from fred.commands._validate_plan import plan_or_build_ahead
    if plan_or_build_ahead(args, *_plan_entries(cases)):
        return 0
    rows = []
    with progress_bar(len(cases), "fabric-validate", json_output=args.json, unit="case") as bar:
        for label, case, row_of, *backpressure in cases:    # an I/O case: its own backpressure
            rows.append(_run(label, case, row_of, args, *backpressure))
            bar.update()
    summary = summarise(rows, _command(args))
    if not args.no_write:
        from studies.mesh_validation import IO_CASES
        # the striped I/O rows belong to the mesh block's speedup table, not the Fig. 9 block
        fred_rows = [r for r in rows if r.fabric != "mesh" and r.case not in IO_CASES]
        if fred_rows:
            write_fabric_validation(summarise(fred_rows, summary.command), output, plot,
                                    switch=block, refused=refused)
        if len(fred_rows) < len(rows):
            from studies.mesh_validation import write_mesh_validation
            write_mesh_validation(summary, output, characterization=args.characterization)
        summary = replace(summary, output=args.output, plot=str(plot) if fred_rows else None)
    if args.json:
        print_json(to_json_dict(summary))
        return 0
    print(format_table(
        ["fabric", "case", "flits", "data", "sink bp", "algorithm", "model cycles", "RTL cycles",
         "RTL/model", "flits checked"],
        [[r.fabric, r.case, r.size_flits, r.dtype, f"{r.sink_backpressure:g}", r.algorithm,
          f"{r.model_cycles:.1f}", r.rtl_cycles, f"{r.ratio:.3f}", r.flits_checked] for r in rows],
        align="llrlrlrrrr", title="RTL fabric vs system model (cycles)"))
    for fabric, label, size, why in refused:
        print(f"not run on the packet fabric: {fabric} {label} at {size} flits: {why}")
    worst = summary.worst
    print(f"{summary.within_tolerance}/{len(rows)} cases within {TOLERANCE:.0%}; worst "
          f"{worst.fabric} {worst.case} at {worst.size_flits} flits: {worst.ratio:.3f}")
    if not args.no_write:
        print(f"wrote {args.output}" + (f" and {summary.plot}" if summary.plot else ""))
    return 0


def _plan_entries(cases) -> tuple[list, list, list]:
    """``(labels, cases, backpressures)`` of :func:`run`'s case tuples for the plan: an I/O
    case carries its own sink backpressure (its fourth item; None: ``--backpressure``)."""
    labels = [_case_label(label, case, bp) for label, case, _, *bp in cases]
    backpressures = [bp[0] if bp else None for _, _, _, *bp in cases]
    return labels, [case for _, case, *_ in cases], backpressures


def _case_label(label: str, case, backpressure=()) -> str:
    """A case in the plan: fabric, case, size and (I/O block) data format and sink backpressure."""
    spec = getattr(case, "spec", None)
    fabric = getattr(case, "fabric", None) or getattr(spec, "name", "mesh")
    size = getattr(case, "size_flits", None) or case.request.size_flits
    extra = f" {spec.dtype} bp {backpressure[0]:g}" if backpressure else ""
    return f"{fabric} {label} {size}{extra}"


def _output_paths(args, block: str) -> tuple[Path, Path]:
    """The document and plot ``block`` writes: ``--output`` (default docs/fabric_validation.md;
    with ``--json`` and no ``--plot`` nothing is written unless asked) and ``--plot`` (default
    beside the document: ``.png`` for the circuit block, ``_<block>.png`` for the others).
    Sets ``args.output`` and ``args.no_write`` accordingly."""
    if args.output is None:               # --json prints; it writes files only when asked
        args.no_write = args.no_write or (args.json and args.plot is None)
        args.output = "docs/fabric_validation.md"
    output = Path(args.output)
    plot = Path(args.plot) if args.plot else (
        output.with_suffix(".png") if block == "circuit"
        else output.with_name(f"{output.stem}_{block.replace('-', '_')}.png"))
    return output, plot


def _fabrics(args) -> list[str]:
    """The fabrics of ``--fabrics``; FredError for an unknown one; on packet switches without
    the mesh."""
    from hdl.contracts.errors import FredError
    fabrics = [f.strip().lower() for f in args.fabrics.split(",") if f.strip()]
    known = parser_default_fabrics().split(",")
    unknown = [f for f in fabrics if f not in known]
    if unknown or not fabrics:
        raise FredError(f"unknown fabric(s) {', '.join(unknown) or '(none)'}; expected some of "
                        f"{', '.join(known)}")
    if args.switch == "packet" and "mesh" in fabrics:
        # the mesh has no FRED packet switches (its own rows come from the circuit run), so a
        # shared --fabrics list (make fabric-validate's FABRIC_VALIDATE_ARGS) drops it here
        fabrics = [f for f in fabrics if f != "mesh"]
    return fabrics


def _fred_cases(args, fabrics) -> tuple[list, list]:
    """The Fig. 9 cases (``studies.fabric_validation.CASES`` x ``--sizes``) on the FRED fabrics
    among ``fabrics``, validated and modelled, on ``--switch``'s switches: ``(cases,
    refused)``. On packet switches a case the packet fabric cannot run is listed in
    ``refused`` (fabric, case, flits, why) instead of failing the run; on circuit switches
    every refusal fails it."""
    from hdl.contracts.errors import FredError
    from hdl.contracts.fabric import FABRICS
    from studies.fabric_case import build_case
    from studies.fabric_validation import CASES
    from studies.packet_fabric_case import build_packet_case
    build = build_case if args.switch == "circuit" else build_packet_case
    cases, refused, cache = [], [], {}
    for f in (f for f in fabrics if f in FABRICS):
        for label, request in CASES:
            for size in args.sizes:
                try:
                    cases.append((label, build(fabric=f, size=size, characterization=args.characterization,
                                               platform_cache=cache, **request, **spec_overrides(args)), None))
                except FredError as exc:
                    if args.switch == "circuit":
                        raise
                    refused.append((f, label, size, str(exc)))
    return cases, refused


def _io_cases(args, fabrics) -> tuple[list, list]:
    """The I/O cases (``studies.fabric_validation.IO_CASES``) on the packet fabrics among
    ``fabrics``, each in every run of :func:`~studies.fabric_validation.io_variants` (int32 at
    ``--sizes``, fp16 at the smallest with sink backpressure), validated and modelled before
    any build: ``(cases, refused)``, a case ``(label, case, None, backpressure)``, a refusal
    ``(fabric, case + data format, flits, why)`` (listed in the block, not dropped)."""
    from fred.commands._concurrent_validate import first_line
    from hdl.contracts.errors import FredError
    from hdl.contracts.fabric import FABRICS
    from studies.fabric_validation import IO_CASES, io_variants
    from studies.packet_fabric_case import build_packet_case
    overrides = {k: v for k, v in spec_overrides(args).items() if k != "dtype"}
    cases, refused, cache = [], [], {}
    for f in (f for f in fabrics if f in FABRICS):
        for dtype, size, backpressure in io_variants(args.sizes, args.dtype, args.backpressure):
            for label, request in IO_CASES:
                try:
                    cases.append((label, build_packet_case(
                        fabric=f, size=size, dtype=dtype, characterization=args.characterization,
                        platform_cache=cache, **request, **overrides), None, backpressure))
                except FredError as exc:
                    refused.append((f, f"{label} {dtype}", size, first_line(str(exc), limit=300)))
    return cases, refused


def parser_default_fabrics() -> str:
    """``--fabrics``' default: every FRED fabric and the mesh."""
    from hdl.contracts.fabric import FABRICS
    return ",".join((*FABRICS, "mesh"))


def _mesh_cases(args) -> list:
    """The mesh's cases (``studies.mesh_validation.MESH_CASES`` x ``--sizes``) in ``--dtype``
    (every case runs int32 and fp16; io-load, a broadcast of the same words, runs the one I/O
    top in both), validated and modelled, each with the function that turns it into a row once
    run."""
    from studies.mesh_case import build_mesh_case
    from studies.mesh_validation import MESH_CASES, mesh_validation_row
    dtype = args.dtype or "int32"
    return [(label, build_mesh_case(size=size, characterization=args.characterization, dtype=dtype, **request),
             mesh_validation_row)
            for label, request in MESH_CASES for size in args.sizes]


def _stripe_io_cases(args, fabrics) -> list:
    """The I/O cases on the Fred-X whose RTL runs the mesh's request (every controller at once,
    ``studies.mesh_validation.STRIPE_IO_FABRICS``), at the mesh cases' sizes (whole stripes)."""
    from studies.mesh_case import build_mesh_case
    from studies.mesh_validation import MESH_CASES, STRIPE_IO_FABRICS, StripeIoCase
    if args.switch != "circuit" or (args.dtype or "int32") != "int32":
        return []
    requests = dict(MESH_CASES)
    out = []
    for fabric in (f for f in fabrics if f in STRIPE_IO_FABRICS):
        for label in STRIPE_IO_FABRICS[fabric]:
            for size in args.sizes:
                flits = build_mesh_case(size=size, characterization=args.characterization, **requests[label]).size_flits
                out.append((label, StripeIoCase(fabric, label, flits, args.characterization), None))
    return out


def _run(label: str, case, row_of, args, backpressure: float | None = None):
    """Run one case's RTL and return its row (``row_of`` for a mesh case, a striped I/O case's
    own, else a FRED one); ``backpressure``: the NPU sinks' (default ``--backpressure``)."""
    backpressure = args.backpressure if backpressure is None else backpressure
    if hasattr(case, "run_row"):
        return case.run_row()
    if row_of is not None:
        from studies.mesh_case import run_mesh_case
        return row_of(label, run_mesh_case(case, seed=args.seed, sink_backpressure=args.backpressure,
                                           watchdog_cycles=args.watchdog))
    from studies.fabric_case import run_case
    from studies.fabric_validation import validation_row
    if args.switch == "packet":
        from studies.packet_fabric_case import run_packet_case
        return validation_row(label, run_packet_case(case, seed=args.seed,
                                                     sink_backpressure=backpressure,
                                                     watchdog_cycles=args.watchdog))
    # no --simulator: run_case's default (fred fabric-sim's too), not None
    chosen = {"simulator": args.simulator} if args.simulator is not None else {}
    return validation_row(label, run_case(case, seed=args.seed, sink_backpressure=args.backpressure,
                                          watchdog_cycles=args.watchdog, **chosen))


def _command(args) -> str:
    parts = ["fred fabric-validate", f"--fabrics {args.fabrics}",
             f"--sizes {','.join(map(str, args.sizes))}"]
    for option in ("npu_latency", "uplink_latency", "dtype", "watchdog", "characterization"):
        value = getattr(args, option)
        if value is not None:
            parts.append(f"--{option.replace('_', '-')} {value}")
    if args.backpressure:
        parts.append(f"--backpressure {args.backpressure}")
    if args.switch != "circuit":
        parts.append(f"--switch {args.switch}")
    if getattr(args, "concurrent", False):
        parts.append("--concurrent")
    if getattr(args, "io", False):
        parts.append("--io")
    parts.append(f"--seed {args.seed}")
    return " ".join(parts)
