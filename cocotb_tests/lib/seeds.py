"""Seeds for random tests, logged and settable from the environment.

One *base seed* per run: ``FRED_SEED=<int>`` if set, else drawn fresh once and exported into
``os.environ`` so that simulator subprocesses started afterwards share it. Each random test
derives its own seed from the base and its name (tests stay independent of each other's order),
and logs both, so any failure is reproduced by rerunning with ``FRED_SEED=<base>``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random

__all__ = ["base_seed", "get_seed", "seeded_rng", "bench_params"]

log = logging.getLogger("fred.seeds")


def base_seed() -> int:
    text = os.environ.get("FRED_SEED")
    if text is None:
        value = random.SystemRandom().randrange(1 << 32)
        os.environ["FRED_SEED"] = str(value)
        return value
    try:
        return int(text, 0)
    except ValueError:
        raise ValueError(f"FRED_SEED must be an integer, got {text!r}") from None


def get_seed(name: str) -> int:
    """Seed for the random test ``name``, derived from :func:`base_seed`; always logged."""
    base = base_seed()
    seed = int.from_bytes(hashlib.sha256(f"{base}:{name}".encode()).digest()[:4], "little")
    message = f"seed for {name}: {seed} (reproduce with FRED_SEED={base})"
    log.warning(message)
    try:  # also into the cocotb log when running inside a simulator
        import cocotb
        cocotb.log.info(message)
    except Exception:  # noqa: BLE001 -- outside a simulator there is no cocotb log
        pass
    return seed


def seeded_rng(name: str) -> random.Random:
    return random.Random(get_seed(name))


def bench_params() -> dict:
    """Parameters the pytest side passed to this cocotb module: the JSON file named by
    ``FRED_BENCH_PARAMS_FILE`` (:func:`cocotb_tests.runner.run_bench` writes it), else the JSON
    in ``FRED_BENCH_PARAMS`` (a module run by hand), else none."""
    path = os.environ.get("FRED_BENCH_PARAMS_FILE")
    if path:
        with open(path) as f:
            return json.load(f)
    return json.loads(os.environ.get("FRED_BENCH_PARAMS", "{}"))
