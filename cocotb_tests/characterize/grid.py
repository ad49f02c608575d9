"""The characterization grid and its per-point result cache (``build/characterize/``).

Each measured point is written to ``<cache>/timing/P<P>m<m><dtype>.json`` (and each cost point
to ``<cache>/cost/<name>.json``) as soon as it is done, so a long run can be resumed and the
report assembled from whatever has been measured; ``fred characterize --fresh`` (what
``make characterize`` runs) clears the cache first.
"""

from __future__ import annotations

import json
from pathlib import Path

from hdl.base.dtypes import DTYPES as _ALL_DTYPES
from hdl.base.errors import FredError

__all__ = ["PORTS", "MIDDLES", "DTYPES", "DEFAULT_CACHE", "timing_grid", "point_name",
           "load_cached", "save_cached"]

PORTS = (4, 8, 16)
MIDDLES = (2, 3)
DTYPES = tuple(_ALL_DTYPES)
DEFAULT_CACHE = Path(__file__).resolve().parents[2] / "build" / "characterize"


def timing_grid(ports=PORTS, middles=MIDDLES, dtypes=DTYPES) -> list[tuple[int, int, str]]:
    """Points in run order: small P first, and fp16 (the paper's gradient format) first within
    each P, so that an interrupted run still covers the most useful points."""
    for p in ports:
        if p < 2:
            raise FredError(f"--ports {p}: the switch needs P >= 2 ports")
    for m in middles:
        if m < 2:
            raise FredError(f"--middle {m}: m must be >= 2")
    for d in dtypes:
        if d not in DTYPES:
            raise FredError(f"--dtypes {d!r} is not one of {', '.join(DTYPES)}")
    order = {d: i for i, d in enumerate(("fp16", "int32", "bf16", "fp32"))}
    return sorted(((p, m, d) for p in ports for m in middles for d in dtypes),
                  key=lambda t: (t[0], order[t[2]], t[1]))


def point_name(ports: int, middle: int, dtype: str) -> str:
    return f"P{ports}m{middle}{dtype}"


def load_cached(cache: Path, kind: str) -> list[dict]:
    folder = Path(cache) / kind
    return [json.loads(f.read_text()) for f in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def save_cached(cache: Path, kind: str, name: str, value: dict) -> None:
    folder = Path(cache) / kind
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(value, indent=1))
