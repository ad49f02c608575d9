"""``fred fabric-sim --concurrent SCENARIO``: concurrent traffic classes on the packet fabric
and on the model's priority engine, side by side (docs/fabric_rtl.md, "Concurrent traffic
classes"). Not a subcommand of its own: ``fabric_sim.run`` hands the option here."""

from __future__ import annotations

from fred.cli import print_json
from hdl.contracts.errors import FredError

__all__ = ["run_concurrent"]


def run_concurrent(args, spec_overrides: dict) -> int:
    """``args``: fabric-sim's; ``spec_overrides``: its fabric options as spec fields."""
    from studies.concurrent_case import build_concurrent_case, run_concurrent_case
    if args.op is not None or args.dim is not None or args.algorithm is not None:
        raise FredError("--concurrent names its classes' ops, groups and algorithms; drop --op, "
                        "--dim and --algorithm")
    if args.switch == "circuit" or args.simulator is not None:
        raise FredError("--concurrent runs on the packet fabric (one Verilated model); drop "
                        "--switch circuit / --simulator")
    case = build_concurrent_case(fabric=args.fabric, scenario=args.concurrent, size=args.size,
                                 load_size=args.load_size, delay=args.delay,
                                 characterization=args.characterization, **spec_overrides)
    if not args.model_only:
        case = run_concurrent_case(case, seed=args.seed, sink_backpressure=args.backpressure,
                                   watchdog_cycles=args.watchdog)
    if args.json:
        print_json(case.to_dict())
        return 0
    print(f"{case.spec.name}, packet switches, concurrent classes ({case.scenario}): "
          f"cycles from the start; latency = completion - the class's delay; alone = the class "
          f"run by itself; model: MP > PP > DP priority (fair: one level, max-min sharing)")
    for cls, model, rtl in zip(case.classes, case.model, case.rtl or [None] * len(case.classes)):
        line = (f"  {cls.name:3} {cls.kind.upper():3} {cls.request.label}, {cls.request.size_flits} "
                f"flits, from cycle {cls.delay}: model completion {model['cycles']:.1f}, latency "
                f"{model['latency']:.1f} (alone {model['alone']:.1f}, fair {model['fair']:.1f})")
        if rtl is not None:
            line += (f"; RTL completion {rtl['cycles']}, latency {rtl['latency']} (alone "
                     f"{rtl['alone']}), RTL/model {rtl['cycles'] / model['cycles']:.3f}, "
                     f"{rtl['flits_checked']} flits checked")
        print(line)
    return 0
