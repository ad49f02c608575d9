"""``fred validate``: the training model against measured training runs (issue 14)."""

from __future__ import annotations

import argparse

from fred.cli import print_json

HELP = "check the training model against measured Megatron-LM iterations (Korthikanti et al. 2022)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cases", default=None,
                        help="validation file (default: data/validation/korthikanti2022.toml)")
    parser.add_argument("--platform", default=None,
                        help="platform TOML (default: the shipped configs/a100-cluster.toml)")
    parser.add_argument("--only", action="append", default=None, metavar="MODEL[/MODE]",
                        help="run only this case or model (repeatable), e.g. megatron-22b")


def run(args) -> int:
    from sysmodel.validation import cluster_platform, run_validation
    platform = cluster_platform(args.platform)
    result = run_validation(cases_path=args.cases, platform=platform, only=args.only,
                            progress=not args.json)
    if args.json:
        print_json(result)
        return 0
    print(f"model vs measured seconds per iteration ({result['source'] or 'validation file'}; "
          f"platform {result['platform']}, one parameter set for every case)")
    print(f"{'case':24s} {'GPUs':>5s} {'strategy':14s} {'measured':>9s} {'model':>9s} {'error':>8s}")
    for r in result["cases"]:
        print(f"{r['case']:24s} {r['gpus']:5d} {r['strategy']:14s} {r['measured_s']:9.2f} "
              f"{r['model_s']:9.2f} {100 * r['error']:+7.1f}%")
    verdict = "meets" if result["meets_target"] else "MISSES"
    print(f"mean absolute error {100 * result['mean_abs_error']:.1f} %, worst "
          f"{100 * result['worst_abs_error']:.1f} % ({result['worst_case']}); {verdict} the target "
          f"(mean <= 5 %, none worse than 10 %)")
    return 0
