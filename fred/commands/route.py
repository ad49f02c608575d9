"""``fred route``: route flows (or a collective) on Fred_m(P) and print each phase's configuration."""

from __future__ import annotations

import argparse

from fred.cli import print_json
from hdl.contracts.errors import FredError
from hdl.compiler.collectives import COLLECTIVES, lower_collective
from hdl.contracts.encoding import DEFAULT_WORD_WIDTH
from hdl.compiler.flows import format_flows, parse_flows
from hdl.compiler.functional import verify_config
from hdl.compiler.routability import explain
from hdl.compiler.router import DEFAULT_BUDGET, Router
from fred.commands._option_types import RANGES

HELP = "route flows or a collective on Fred_m(P); print phases and per-microswitch settings"


def _ports_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated port numbers, got {text!r}") from None


def _pairs(text: str) -> list[tuple[int, int]]:
    pairs = []
    for item in text.replace(" ", "").split(","):
        if not item:
            continue
        if item.count(">") != 1:
            raise argparse.ArgumentTypeError(f"pair {item!r}: expected SRC>DST, e.g. '0>1,2>3'")
        try:
            src, dst = (int(x) for x in item.split(">"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"pair {item!r}: ports must be integers") from None
        pairs.append((src, dst))
    return pairs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ports", type=RANGES["route_ports"], required=True, help="P, number of switch ports")
    parser.add_argument("--middle", type=RANGES["middle"], default=3, help="m, middle subnetworks (default 3)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--flows", help='flows "IN>OUT; ...", e.g. "0,1,2>0,1,2; 3>4,5" (ranges a-b ok)')
    what.add_argument("--collective", choices=COLLECTIVES, help="lower this collective first")
    parser.add_argument("--group", type=_ports_list, help="collective group, e.g. 0,1,2,3")
    parser.add_argument("--root", type=RANGES["port"], help="root of reduce/broadcast/multicast")
    parser.add_argument("--pairs", type=_pairs, help="unicast/permutation pairs, e.g. '0>1,2>3'")
    parser.add_argument("--word-width", type=RANGES["word_width"], default=DEFAULT_WORD_WIDTH,
                        help=f"configuration word width in bits (default {DEFAULT_WORD_WIDTH})")
    parser.add_argument("--no-split", action="store_true",
                        help="fail instead of splitting flows that do not fit one phase")
    parser.add_argument("--budget", type=RANGES["budget"], default=DEFAULT_BUDGET,
                        help=f"search bound in nodes per one-phase attempt (default {DEFAULT_BUDGET})")
    parser.add_argument("--all-microswitches", action="store_true",
                        help="also list idle microswitches")
    parser.add_argument("--explain", action="store_true",
                        help="when one phase is not enough, say why (a minimal set of flows that "
                             "cannot share a phase and where they collide)")
    parser.add_argument("--memh", default=None, metavar="FILE",
                        help="also write the phases' configuration words as a $readmemh memory "
                             "image: phase k at words k*N..k*N+N-1 (N words per phase)")


def memh_text(phases: list[dict], *, ports: int, middle: int, word_width: int) -> str:
    """A ``$readmemh`` image of the phases' words (hex, one word a line; ``//`` comments, which
    ``$readmemh`` skips, name each phase): what a host or a testbench streams into the
    configuration port, phase k from word k*N."""
    digits = (word_width + 3) // 4
    count = len(phases[0]["words"]) if phases else 0
    lines = [f"// Fred_{middle}({ports}) configurations: {len(phases)} phase(s) x {count} words of "
             f"{word_width} bits (fred route --memh); phase k at words k*{count}.."]
    for k, phase in enumerate(phases):
        lines.append(f"// phase {k}: {'; '.join(phase['flows'])}")
        lines += [f"{w:0{digits}x}" for w in phase["words"]]
    return "\n".join(lines) + "\n"


def run(args) -> int:
    from fred.commands._option_types import output_path
    output_path(args.memh, "--memh")          # before the routing, not after
    if args.flows is not None:
        if args.group is not None or args.root is not None or args.pairs is not None:
            raise FredError("--group/--root/--pairs go with --collective, not --flows")
        steps = [("flows", parse_flows(args.flows))]
    else:
        lowered = lower_collective(args.collective, group=args.group, ports=args.ports,
                                   root=args.root, pairs=args.pairs)
        steps = [(f"{args.collective} step {i}", flows) for i, flows in enumerate(lowered)]
    router = Router(ports=args.ports, middle=args.middle, budget=args.budget)
    phases = []
    notes = []
    for label, flows in steps:
        result = router.route(flows, split=not args.no_split)
        if not result.routable_in_one_phase:
            proven = "proven impossible" if result.one_phase == "impossible" else "not found within the search bound"
            notes.append(f"{label}: one phase {proven}; split into {len(result.phases)} phases "
                         f"({result.method}; {'optimal' if result.optimal else f'lower bound {result.lower_bound}'})")
            if args.explain:
                why = explain(flows, ports=args.ports, middle=args.middle, router=router)
                if not why["routable"]:
                    notes.append(f"{label}: why: {why['reason']}")
        for phase in result.phases:
            verify_config(phase.config, phase.flows)  # every printed configuration is checked
            phases.append({
                "step": label, "flows": [str(f) for f in phase.flows],
                "one_phase_status": result.one_phase,
                "words": phase.config.encode(args.word_width),
                "bits": phase.config.bit_width,
                "microswitches": phase.config.describe(include_idle=args.all_microswitches),
                "config": phase.config.to_dict(),
            })
    if args.memh:
        from pathlib import Path
        Path(args.memh).write_text(memh_text(phases, ports=args.ports, middle=args.middle,
                                             word_width=args.word_width))
    if args.json:
        print_json({"ports": args.ports, "middle": args.middle, "word_width": args.word_width,
                    "phase_count": len(phases), "notes": notes, "phases": phases})
        return 0
    print(f"Fred_{args.middle}({args.ports}): {len(phases)} phase(s)")
    for note in notes:
        print(f"note: {note}")
    for i, phase in enumerate(phases):
        print(f"phase {i} [{phase['step']}]: {format_flows(parse_flows('; '.join(phase['flows'])))}")
        for line in phase["microswitches"]:
            print(f"  {line}")
        width = (args.word_width + 3) // 4
        print(f"  words ({phase['bits']} bits, {args.word_width}-bit words): "
              + " ".join(f"{w:0{width}x}" for w in phase["words"]))
    return 0
