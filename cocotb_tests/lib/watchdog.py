"""Fail a test as soon as nothing moves while traffic is outstanding.

:class:`StreamHarness` calls :meth:`Watchdog.tick` once per cycle and :meth:`Watchdog.kick` on
every transfer of any of its agents; when ``outstanding()`` is non-zero and no transfer happened
for ``cycles`` cycles, :class:`WatchdogTimeout` is raised (failing the test at that cycle rather
than at a global timeout much later).
"""

from __future__ import annotations

from typing import Callable

__all__ = ["Watchdog", "WatchdogTimeout"]


class WatchdogTimeout(AssertionError):
    pass


class Watchdog:
    def __init__(self, cycles: int, outstanding: Callable[[], int] | None = None, name: str = "watchdog"):
        if cycles <= 0:
            raise ValueError(f"watchdog cycles must be positive, got {cycles}")
        self.cycles = cycles
        self.outstanding = outstanding or (lambda: 0)
        self.name = name
        self.quiet = 0

    def kick(self) -> None:
        self.quiet = 0

    def tick(self, cycle: int) -> None:
        pending = self.outstanding()
        if not pending:
            self.quiet = 0
            return
        self.quiet += 1
        if self.quiet >= self.cycles:
            raise WatchdogTimeout(f"{self.name}: no transfer for {self.quiet} cycles with "
                                  f"{pending} item(s) outstanding (cycle {cycle}): deadlock or loss")
