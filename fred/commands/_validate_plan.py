"""``fred fabric-validate --plan`` and ``--jobs``: a block's cases and the distinct Verilated
builds they need, printed before anything is built, or those builds made ahead of the runs,
several at once (``studies.validation_plan``). Not a subcommand: the Fig. 9, I/O and
concurrent blocks (``fabric_validate``, ``_concurrent_validate``) call it once their cases are
validated and modelled."""

from __future__ import annotations

__all__ = ["plan_or_build_ahead", "print_plan"]


def plan_or_build_ahead(args, labels, cases, backpressures) -> bool:
    """``--plan``: print each case's builds and the distinct builds, and return True (nothing
    runs); else with ``--jobs`` above 1 make the distinct builds ahead
    (:func:`studies.validation_plan.build_ahead`) and return False. ``backpressures``: per
    case its own NPU sink backpressure (None: ``--backpressure``)."""
    import sys

    from fred.parallel import parse_jobs
    from studies.validation_plan import build_ahead, case_builds
    jobs = parse_jobs(args.jobs)
    if not args.plan and jobs == 1:
        return False
    builds = [case_builds(case, switch=args.switch, seed=args.seed, simulator=args.simulator,
                          backpressure=args.backpressure if bp is None else bp)
              for case, bp in zip(cases, backpressures)]
    if not args.plan:
        build_ahead(builds, jobs, announce=lambda line: print(line, file=sys.stderr, flush=True))
        return False
    print_plan(labels, builds)
    return True


def print_plan(labels, builds) -> None:
    """The plan's two tables (:func:`studies.validation_plan.plan_rows`) and its count."""
    from fred.table import format_table
    from studies.validation_plan import plan_rows
    case_rows, build_rows = plan_rows(labels, builds)
    print(format_table(["case", "runs", "builds"], case_rows, align="lrl", title="cases"))
    print(format_table(["build", "cases", "what"], build_rows, align="rrl", title="distinct builds"))
    print(f"{len(case_rows)} cases, {sum(r[1] for r in case_rows)} runs, {len(build_rows)} distinct builds "
          f"(builds named 'built when run' are made by their case's runner)")
