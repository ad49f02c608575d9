"""``fred fabric-validate --switch packet --concurrent``: the concurrent traffic-class
scenarios on the in-switch packet fabrics against the model's priority engine, into their own
block of docs/fabric_validation.md (``studies.concurrent_validation``). Not a subcommand of its
own: ``fabric_validate.run`` hands the option here."""

from __future__ import annotations

from pathlib import Path

from fred.cli import print_json
from hdl.contracts.errors import FredError

__all__ = ["run_concurrent_validate"]


def run_concurrent_validate(args, fabrics, command: str) -> int:
    from fred.commands.fabric_sim import spec_overrides
    from fred.progress import progress_bar
    from fred.table import format_table
    from studies.concurrent_case import run_concurrent_case
    from studies.concurrent_validation import (CONCURRENT_TOLERANCE, case_label, concurrent_cases,
                                               concurrent_rows, write_concurrent_validation)
    from studies.fabric_validation import run_stamp
    if args.switch != "packet":
        raise FredError("--concurrent runs on the packet fabric: add --switch packet")
    if args.output is None and args.json:     # --json prints; files only when asked
        args.no_write = True
    output = Path(args.output or "docs/fabric_validation.md")
    if not args.no_write:
        from studies.report import check_writable
        check_writable(output)
    cases, refused = concurrent_cases(fabrics, args.sizes, characterization=args.characterization,
                                      **spec_overrides(args))
    if not cases:
        print("fred fabric-validate --concurrent: no fabric in "
              "--fabrics; nothing to run")
        return 0
    from fred.commands._validate_plan import plan_or_build_ahead
    if plan_or_build_ahead(args, [case_label(case) for case in cases], cases, [None] * len(cases)):
        return 0
    rows, failed = [], []
    with progress_bar(len(cases), "fabric-validate --concurrent", json_output=args.json,
                      unit="case") as bar:
        for case in cases:
            try:
                rows += concurrent_rows(run_concurrent_case(case, seed=args.seed,
                                                            sink_backpressure=args.backpressure,
                                                            watchdog_cycles=args.watchdog))
            except FredError as err:     # a hang or wrong data: reported, the others still run
                failed.append((case_label(case), len(case.classes), first_line(str(err))))
            bar.update()
    date, machine = run_stamp()
    if not args.no_write:
        write_concurrent_validation(rows, output, command, date, machine, refused, failed)
    within = sum(r.within for r in rows)
    if args.json:
        print_json({"command": command, "tolerance": CONCURRENT_TOLERANCE, "within": within,
                    "rows": [dict(r.__dict__, ratio=r.ratio, latency_ratio=r.latency_ratio)
                             for r in rows], "refused": [list(r) for r in refused],
                    "failed": [list(f) for f in failed]})
        return 0
    print(format_table(
        ["fabric", "scenario", "class", "flits", "from", "model", "RTL", "RTL/model",
         "model latency", "RTL latency", "model alone", "RTL alone"],
        [[r.fabric, r.scenario, r.name, r.size_flits, r.delay, f"{r.model_cycles:.1f}",
          r.rtl_cycles, f"{r.ratio:.3f}", f"{r.model_latency:.1f}", r.rtl_latency,
          f"{r.model_alone:.1f}", r.rtl_alone] for r in rows],
        align="lllrrrrrrrrr", title="concurrent traffic classes, packet fabric vs model (cycles)"))
    for fabric, why in refused:
        print(f"not run: {fabric}: {why}")
    for label, _, why in failed:
        print(f"did not complete: {label}: {why}")
    total = len(rows) + sum(n for _, n, _ in failed)
    print(f"{within}/{total} classes within {CONCURRENT_TOLERANCE:.0%}")
    if not args.no_write:
        print(f"wrote {output}")
    return 0


def first_line(text: str, limit: int = 600) -> str:
    """An error or refusal for a report or block: its first line, cut at ``limit`` characters
    (this command's failures, and ``fred fabric-validate --io``'s refusals at 300)."""
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[:limit] + " ..."
