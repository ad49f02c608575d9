"""``fred validate``: the training model against measured training runs (docs/sysmodel.md, Fidelity);
``--collectives``: the collectives alone against measured NCCL collectives (docs/sysmodel.md,
"In-switch efficiency")."""

from __future__ import annotations

import argparse

from fred.cli import print_json
from fred.commands._model_options import switch_timing_json, switch_timing_text
from fred.table import format_table
from studies.report import to_json_dict

HELP = "check the training model against measured Megatron-LM iterations (Korthikanti et al. 2022)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--collectives", action="store_true",
                        help="validate the collectives alone against measured NCCL collectives "
                             "(ring and NVLink SHARP on DGX A100 / H100; default cases: "
                             "data/validation/nccl_collectives.toml, platforms: the shipped "
                             "configs/<platform>.toml)")
    parser.add_argument("--cases", default=None,
                        help="validation file (default: data/validation/korthikanti2022.toml; "
                             "with --collectives: data/validation/nccl_collectives.toml)")
    parser.add_argument("--platform", default=None,
                        help="platform TOML (default: the shipped configs/a100-cluster.toml)")
    parser.add_argument("--characterization", default=None, metavar="PATH",
                        help="measured switch timing, a JSON file in the format of "
                             "docs/characterization-schema.md (default: the characterization "
                             "shipped with the package)")
    parser.add_argument("--only", action="append", default=None, metavar="MODEL[/MODE]",
                        help="run only this case or model (repeatable), e.g. megatron-22b")
    parser.add_argument("--whole", action="store_true",
                        help="run every case's whole iteration (by default a long 1F1B pipeline's "
                             "figures are carried from two short runs whose steady periods are "
                             "checked to repeat: sysmodel/pipeline_collapse.py)")
    parser.add_argument("--trace", default=None, metavar="FILE",
                        help="write the executed schedule of every case run (one process per "
                             "case; each simulated once more) as Chrome trace-event JSON, for "
                             "Perfetto or chrome://tracing (sysmodel/chrome_trace.py)")


def run(args) -> int:
    if args.collectives:
        return _run_collectives(args)
    from fred.gc_policy import survivors_frozen
    from fred.progress import progress_bar, wanted
    from sysmodel.chrome_trace import TraceRecorder
    from studies.validation import FABRIC, case_workload, cluster_platform, run_validation, select_cases
    recorder = TraceRecorder(args.trace) if args.trace else None   # a bad path fails before the work
    platform = cluster_platform(args.platform, characterization=args.characterization)
    cases, _ = select_cases(args.cases, args.only)
    # a progress bar on a terminal; else the per-case log on stderr (none with --json)
    # the collector skips what survived the set-up and each case (fred/gc_policy.py, Speed)
    with progress_bar(len(cases), "validate", json_output=args.json, unit="case") as bar, \
            survivors_frozen(keep_frozen=args._process_exits) as checkpoint:
        def tick(n: int = 1) -> None:
            bar.update(n)
            checkpoint()
        result = run_validation(cases_path=args.cases, platform=platform, only=args.only,
                                progress=not args.json and not wanted(args.json), tick=tick,
                                collapse=not args.whole)
    if recorder:
        for case in cases:
            wl = case_workload(case)
            recorder.add(case.name, platform.scaled(npus=case.gpus), FABRIC, wl, microbatches=wl.microbatches)
        _wrote(recorder)
    if args.json:
        print_json({**to_json_dict(result), "switch_timing": switch_timing_json(platform)})
        return 0
    print(switch_timing_text(platform))
    print()
    rows = [[r.case, r.gpus, r.strategy, f"{r.measured_s:.2f}", f"{r.model_s:.2f}",
             f"{100 * r.error:+.1f} %"] for r in result.cases]
    print(format_table(["case", "GPUs", "strategy", "measured s", "model s", "error"], rows,
                       align="lrlrrr",
                       title=f"model vs measured seconds per iteration ({result.source or 'validation file'}; "
                             f"platform {result.platform}, one parameter set for every case)"))
    verdict = "meets" if result.meets_target else "MISSES"
    print(f"mean absolute error {100 * result.mean_abs_error:.1f} %, worst "
          f"{100 * result.worst_abs_error:.1f} % ({result.worst_case}); {verdict} the target "
          f"(mean <= 5 %, none worse than 10 %)")
    return 0


def _wrote(recorder) -> None:
    import sys
    print(f"trace: {len(recorder.iterations)} iteration(s) written to {recorder.write()}", file=sys.stderr)


def _run_collectives(args) -> int:
    from hdl.contracts.errors import FredError
    from studies.collective_validation import run_collective_validation
    if args.platform or args.only or args.trace:
        raise FredError("fred validate --collectives: --platform, --only and --trace do not apply "
                         "(each case names its shipped platform)")
    result = run_collective_validation(args.cases, characterization=args.characterization)
    if args.json:
        print_json(to_json_dict(result))
        return 0
    rows = [[r.case, r.collective, r.algorithm, r.gpus, f"{r.size_bytes / 2 ** 30:g}",
             f"{r.measured_busbw_gbps:.1f}", f"{r.model_busbw_gbps:.1f}", f"{100 * r.error:+.1f} %",
             "fitted" if r.fitted else "predicted"] for r in result.cases]
    print(format_table(["case", "collective", "algorithm", "GPUs", "GiB", "measured busbw",
                        "model busbw", "time error", "point"], rows, align="lllrrrrrl",
                       title=f"model vs measured NCCL collectives ({result.source}; busbw GB/s, "
                             f"nccl-tests' definition; error = model time / measured time - 1)"))
    print()
    for name, values in result.parameters.items():
        eff = ", ".join(f"{v} in_switch_efficiency {x:g}" for v, x in values["in_switch_efficiency"].items())
        print(f"parameters, configs/{name}.toml: link efficiency {values['link_efficiency']:g}"
              + (f"; {eff}" if eff else ""))
    print(f"fitted points: {', '.join(result.fitted)}")
    for s in result.statements:
        print(f"statement {s.statement} ({s.thread}): {s.claim}: "
              f"{'holds' if s.holds else 'DOES NOT HOLD'} in the model (smallest NVLS / ring time "
              f"{s.nvls_over_ring:.2f}, at {s.worst_at})")
    verdict = "meets" if result.meets_target else "MISSES"
    print(f"mean absolute error {100 * result.mean_abs_error:.1f} %, worst "
          f"{100 * result.worst_abs_error:.1f} % ({result.worst_case}); predicted points only: mean "
          f"{100 * result.mean_abs_error_predicted:.1f} %, worst {100 * result.worst_abs_error_predicted:.1f} %; "
          f"{verdict} the target (mean <= 5 %, none worse than 10 %, statements hold)")
    return 0
