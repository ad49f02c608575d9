"""Benchmark of the system model: time per collective evaluation, 1,000 concurrent-group
evaluations, the whole ``fred eval`` run and one sweep configuration. Prints figures only."""

from __future__ import annotations

import argparse
import random
import time

from sysmodel import collectives as _collectives
from sysmodel.collectives import Collective, evaluate
from sysmodel.platform import FABRICS, default_platform


def bench_collectives(repeat: int) -> None:
    platform = default_platform()
    wafer = tuple(range(platform.npus))
    for fabric in FABRICS:
        evaluate(platform, fabric, [Collective("all-reduce", wafer, 1e9)])  # warm caches
        start = time.perf_counter()
        for _ in range(repeat):
            _collectives._RESULTS.clear()  # measure the model, not the result cache
            evaluate(platform, fabric, [Collective("all-reduce", wafer, 1e9)])
        per = (time.perf_counter() - start) / repeat
        print(f"collective  {fabric:7s} wafer all-reduce         {per * 1e3:8.3f} ms per evaluation")
    rng = random.Random(1)
    sets = []
    for _ in range(1000):
        ranks = list(range(platform.npus))
        rng.shuffle(ranks)
        k = rng.choice([2, 4, 5])
        sets.append([Collective("all-reduce", tuple(ranks[i:i + k]), 1e8)
                     for i in range(0, platform.npus - k + 1, k)])
    for fabric in FABRICS:
        _collectives._RESULTS.clear()
        start = time.perf_counter()
        for groups in sets:
            evaluate(platform, fabric, groups)
        total = time.perf_counter() - start
        print(f"concurrent  {fabric:7s} 1000 random group sets     {total:8.3f} s "
              f"({total:.3f} ms per set)")


def bench_eval() -> None:
    from sysmodel.evaluation import run_evaluation, sweep
    start = time.perf_counter()
    run_evaluation(output=None, progress=False)
    print(f"fred eval   whole run (no files)              {time.perf_counter() - start:8.3f} s")
    start = time.perf_counter()
    rows = sweep("transformer-17b", "fred-d", progress=False)
    total = time.perf_counter() - start
    print(f"fred sweep  transformer-17b fred-d            {total:8.3f} s "
          f"({total / len(rows) * 1e3:.1f} ms per configuration, {len(rows)} configurations)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--no-eval", action="store_true", help="skip the end-to-end figures")
    args = parser.parse_args()
    bench_collectives(args.repeat)
    if not args.no_eval:
        bench_eval()


if __name__ == "__main__":
    main()
