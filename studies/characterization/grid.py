"""The characterization grid and its per-point result cache (``build/characterize/``).

Each measured point is written to ``<cache>/timing/P<P>m<m><dtype>.json`` (and each cost point
to ``<cache>/cost/<name>.json``) as soon as it is done, so a long run can be resumed and the
report assembled from whatever has been measured; ``fred characterize --fresh`` (what
``make characterize`` runs) clears the cache first.
"""

from __future__ import annotations

import json
from pathlib import Path

from hdl.contracts.dtypes import DTYPES as _ALL_DTYPES
from hdl.contracts.characterization import point_name
from hdl.contracts.errors import FredError

__all__ = ["PORTS", "MIDDLES", "DTYPES", "CHIPLETS", "CHIPLET_MIDDLE", "CHIPLET_DTYPE",
           "DEFAULT_CACHE", "timing_grid", "chiplet_points", "point_name",
           "load_cached", "save_cached"]

PORTS = (4, 8, 16)
MIDDLES = (2, 3)
DTYPES = tuple(_ALL_DTYPES)
#: Sizes P of the chiplets the paper builds its wafer's switches from (shared spec, sections 2-3;
#: sizes from secondary sources): Fred_3(12) and Fred_3(10). Which chiplet builds which level
#: is the platform's (``configs/paper.toml``, ``[fred.chiplets]``), not this grid's. Measured at
#: m = 3 and fp16 (the paper's gradient format) on top of the grid.
CHIPLETS = (12, 10)
CHIPLET_MIDDLE = 3
CHIPLET_DTYPE = "fp16"
DEFAULT_CACHE = Path(__file__).resolve().parents[2] / "build" / "characterize"


def chiplet_points(chiplets=CHIPLETS) -> list[tuple[int, int, str]]:
    """(P, 3, fp16) of each chiplet size."""
    return [(p, CHIPLET_MIDDLE, CHIPLET_DTYPE) for p in chiplets]


def timing_grid(ports=PORTS, middles=MIDDLES, dtypes=DTYPES,
                chiplets=CHIPLETS) -> list[tuple[int, int, str]]:
    """Points in run order: the product of ``ports``, ``middles`` and ``dtypes`` plus the
    chiplet points (:func:`chiplet_points`), small P first, and fp16 (the paper's gradient format)
    first within each P, so that an interrupted run still covers the most useful points."""
    for p in tuple(ports) + tuple(chiplets):
        if p < 2:
            raise FredError(f"--ports {p}: the switch needs P >= 2 ports")
    for m in middles:
        if m < 2:
            raise FredError(f"--middle {m}: m must be >= 2")
    for d in dtypes:
        if d not in DTYPES:
            raise FredError(f"--dtypes {d!r} is not one of {', '.join(DTYPES)}")
    order = {d: i for i, d in enumerate(("fp16", "int32", "bf16", "fp32"))}
    points = {(p, m, d) for p in ports for m in middles for d in dtypes} | set(chiplet_points(chiplets))
    return sorted(points, key=lambda t: (t[0], order[t[2]], t[1]))




def load_cached(cache: Path, kind: str) -> list[dict]:
    folder = Path(cache) / kind
    return [json.loads(f.read_text()) for f in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def save_cached(cache: Path, kind: str, name: str, value: dict) -> None:
    folder = Path(cache) / kind
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(value, indent=1))
