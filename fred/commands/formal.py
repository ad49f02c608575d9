"""``fred formal``: the designs' formal properties (``hdl.designs.formal``) proven with SymbiYosys
and Yices (:mod:`eda.formal`); ``make formal`` runs every proof and every mutant."""

from __future__ import annotations

import argparse
from pathlib import Path

from fred.cli import print_json

HELP = "prove the designs' formal properties (SymbiYosys + Yices), and check each mutant fails"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("proofs", nargs="*", metavar="PROOF",
                        help="proof names or shell patterns (stream_buffer.*); default: all")
    parser.add_argument("--quick", action="store_true",
                        help="only the proofs the default test suite runs")
    parser.add_argument("--mutants", action="store_true",
                        help="also run every mutant of each proof; each must fail")
    parser.add_argument("--list", action="store_true", help="list the proofs and exit")
    parser.add_argument("--workdir", type=Path, default=Path("build/formal"),
                        help="sby work folders, one per proof and mutant (default: build/formal)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per sby run")


def run(args) -> int:
    from eda.formal import run_proof
    from hdl.designs.formal.catalog import select_proofs
    proofs = select_proofs(args.proofs, quick_only=args.quick)
    if args.list:
        rows = [{"name": p.name, "mode": p.mode, "depth": p.depth, "quick": p.quick,
                 "mutants": list(p.mutants)} for p in proofs]
        if args.json:
            print_json(rows)
        else:
            for p in proofs:
                print(f"{p.name:40s} {p.mode:5s} depth {p.depth:3d} {'quick' if p.quick else ''}")
        return 0
    outcomes = []
    for proof in proofs:
        outcome = run_proof(proof, workdir=args.workdir, with_mutants=args.mutants,
                            timeout=args.timeout)
        outcomes.append(outcome)
        if not args.json:
            _print_outcome(outcome)
    if args.json:
        print_json([o.summary() for o in outcomes])
    return 0 if all(o.ok for o in outcomes) else 1


def _print_outcome(outcome) -> None:
    r = outcome.result
    print(f"{outcome.name}: {r.status} ({outcome.mode}, depth {outcome.depth}, {r.seconds:.1f} s)",
          flush=True)
    for message in r.failed:
        print(f"    {message}")
    for name, m in outcome.mutants.items():
        verdict = "killed" if m.status == "FAIL" else f"SURVIVED ({m.status})"
        print(f"    mutant {name}: {verdict} ({m.seconds:.1f} s)" +
              (f": {m.failed[0]}" if m.failed else ""), flush=True)
