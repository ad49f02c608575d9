"""3D-parallel strategies MP(a)-DP(b)-PP(c) and their device placement (pure Python).

Placement (the paper's): MP ranks on consecutive NPUs (or switch ports), then PP, then DP:
``rank = mp + MP * (pp + PP * dp)`` (:meth:`Strategy.rank`, the one place this formula is
written). On the FRED tree this puts an MP group inside one L1 whenever MP divides the L1 size;
on the row-major mesh it puts MP groups along rows, the placement favouring MP.
:meth:`Strategy.groups` gives the concurrent groups of each dimension,
:meth:`Strategy.stage_transfers` the stage-boundary (pipeline) transfers. The system model and
the compiler's routability study both place ranks with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hdl.contracts.errors import FredError

__all__ = ["Strategy", "parse_strategy", "DIMS", "factorisations"]

DIMS = ("mp", "dp", "pp")
_PATTERN = re.compile(r"^\s*MP\(?(\d+)\)?\s*-\s*DP\(?(\d+)\)?\s*-\s*PP\(?(\d+)\)?\s*$", re.I)


@dataclass(frozen=True)
class Strategy:
    """``mp``, ``dp``, ``pp`` degrees (keyword-only, each >= 1)."""

    mp: int
    dp: int
    pp: int

    def __post_init__(self):
        for name in DIMS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise FredError(f"strategy {name.upper()} degree must be a positive integer, got {value!r}")

    @property
    def npus(self) -> int:
        return self.mp * self.dp * self.pp

    def __str__(self) -> str:
        return f"MP{self.mp}-DP{self.dp}-PP{self.pp}"

    @property
    def paper_name(self) -> str:
        """The paper's spelling, ``MP(2)-DP(5)-PP(2)``."""
        return f"MP({self.mp})-DP({self.dp})-PP({self.pp})"

    def check(self, npus: int) -> None:
        if self.npus != npus:
            raise FredError(f"strategy {self} uses MP*DP*PP = {self.mp}*{self.dp}*{self.pp} = "
                            f"{self.npus} NPUs but the wafer has {npus}")

    def rank(self, *, mp: int, dp: int, pp: int) -> int:
        """The NPU (port) of MP rank ``mp``, DP replica ``dp``, pipeline stage ``pp``."""
        return mp + self.mp * (pp + self.pp * dp)

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(mp, dp, pp) of ``rank``."""
        mp, rest = rank % self.mp, rank // self.mp
        return mp, rest // self.pp, rest % self.pp

    def groups(self, dim: str) -> list[tuple[int, ...]]:
        """Every group along ``dim`` (``mp``, ``dp`` or ``pp``); each rank is in exactly one."""
        if dim not in DIMS:
            raise FredError(f"unknown dimension {dim!r}; expected one of {', '.join(DIMS)}")
        out = []
        for mp in range(self.mp if dim != "mp" else 1):
            for dp in range(self.dp if dim != "dp" else 1):
                for pp in range(self.pp if dim != "pp" else 1):
                    size = getattr(self, dim)
                    coords = [dict(mp=mp, dp=dp, pp=pp) for _ in range(size)]
                    for i, c in enumerate(coords):
                        c[dim] = i
                    out.append(tuple(self.rank(**c) for c in coords))
        return out

    def stage_transfers(self, stage: int) -> list[tuple[int, tuple[int, ...]]]:
        """(source, destinations) for the activations crossing pipeline boundary
        ``stage -> stage+1``, one per DP replica: MP rank 0 of the stage multicasts to the
        whole MP group of the next stage (activations are replicated across MP ranks after
        Megatron's all-reduce, so one copy suffices)."""
        if not 0 <= stage < self.pp - 1:
            raise FredError(f"pipeline boundary {stage} does not exist for {self}")
        return [(self.rank(mp=0, dp=dp, pp=stage),
                 tuple(self.rank(mp=m, dp=dp, pp=stage + 1) for m in range(self.mp)))
                for dp in range(self.dp)]


def parse_strategy(text: str) -> Strategy:
    """Parse ``MP2-DP5-PP2`` or ``MP(2)-DP(5)-PP(2)`` (case-insensitive)."""
    match = _PATTERN.match(str(text))
    if not match:
        raise FredError(f"strategy {text!r} is not of the form MP<a>-DP<b>-PP<c>, e.g. MP2-DP5-PP2")
    mp, dp, pp = (int(x) for x in match.groups())
    return Strategy(mp=mp, dp=dp, pp=pp)


def factorisations(npus: int) -> list[Strategy]:
    """Every MP x DP x PP = ``npus`` (ordered by MP, then DP)."""
    out = []
    for mp in range(1, npus + 1):
        if npus % mp:
            continue
        for dp in range(1, npus // mp + 1):
            if (npus // mp) % dp:
                continue
            out.append(Strategy(mp=mp, dp=dp, pp=npus // (mp * dp)))
    return out
