"""The system model's hierarchical all-reduce on the RTL fabrics Fred-A/C, charged two ways
(issue 15, docs/fabric_validation.md):

* the model's own rule (``sysmodel.collectives._fred_hierarchical``): the three stages' loads
  added per link, the busiest link charged once, plus the stages' latencies;
* stage by stage: each stage (reduce-scatter rings in the L1s, all-reduce rings across the
  L1s, all-gather rings in the L1s) evaluated by the model on its own (its busiest link plus
  its latency), the three times added -- what dependent stages cost;

and the ring, for comparison. Model only (no RTL): ``python scripts/model_hierarchical_stages.py
[--sizes 40,4000]``.
"""

from __future__ import annotations

import argparse

from hdl.contracts.fabric import fabric_spec, make_request
from sysmodel.collectives import Collective, evaluate
from sysmodel.fabric_model import fabric_platform, model_cycles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="40,4000", help="flits per NPU, comma-separated")
    args = parser.parse_args()
    for name in ("fred-a", "fred-c"):
        spec = fabric_spec(name)
        platform = fabric_platform(spec)
        timing = platform[0].switch_at("l1")
        k, l1s = spec.npus_per_l1, spec.l1_count
        locals_ = [list(range(k * j, k * j + k)) for j in range(l1s)]
        crosses = [[k * j + i for j in range(l1s)] for i in range(k)]
        for size in (int(x) for x in args.sizes.split(",")):
            request = make_request(spec, op="all-reduce", size_flits=size, group="wafer")
            own = model_cycles(spec, request, platform=platform)
            ring = model_cycles(spec, request, platform=platform, algorithm="ring")
            nbytes = size * timing.flit_bytes
            stages = [[Collective("reduce-scatter", group=g, size=nbytes) for g in locals_],
                      [Collective("all-reduce", group=g, size=nbytes / k) for g in crosses],
                      [Collective("all-gather", group=g, size=nbytes) for g in locals_]]
            parts = [evaluate(platform[0], name, st, algorithm="ring").time_s / timing.cycle_s
                     for st in stages]
            print(f"{name} {size} flits: model's rule ({own.algorithm}) {own.cycles:.0f} = "
                  f"{own.bandwidth_cycles:.0f} link + {own.latency_cycles:.0f} latency; stage by "
                  f"stage {sum(parts):.0f} = {' + '.join(f'{p:.0f}' for p in parts)}; ring "
                  f"{ring.cycles:.0f}")


if __name__ == "__main__":
    main()
