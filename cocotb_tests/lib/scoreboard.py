"""A scoreboard keyed by tags carried in the payload.

The bench declares every item it expects as ``(port, tag) -> value`` and reports every item it
observes. Each error is classified so a failure says what kind of bug it is:

``loss``        expected at a port, never observed there (reported by :meth:`check`);
``duplicate``   observed again at a port where it was already observed;
``corruption``  observed at the right port with the right tag but a different value, or with a
                tag that was never sent (the tag itself corrupted, or a spurious item);
``misroute``    a known tag observed at a port that was not expecting it;
``reorder``     (only with ``ordered=True``) a tag arrived at a port after a tag that was expected
                later there (a lost item alone does not count as a reorder).

Expectations and observations may interleave freely; tags must be unique per port.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Hashable

__all__ = ["ScoreboardError", "TaggedScoreboard"]

KINDS = ("loss", "duplicate", "corruption", "misroute", "reorder")


@dataclass(frozen=True)
class ScoreboardError:
    kind: str
    port: Hashable
    tag: Hashable
    detail: str

    def __str__(self) -> str:
        return f"{self.kind} at port {self.port} tag {self.tag!r}: {self.detail}"


class TaggedScoreboard:
    """Parameters:
        name: used in the failure message.
        ordered: also check that each port observes its tags in the order they were expected.
        compare: ``compare(expected, observed) -> bool``; default ``==``.
        fmt: formats values in messages (default ``hex`` for ints, ``repr`` otherwise).
    """

    def __init__(self, name: str = "scoreboard", *, ordered: bool = False, compare=None, fmt=None):
        self.name = name
        self.ordered = ordered
        self._compare = compare or (lambda expected, observed: expected == observed)
        self._fmt = fmt or (lambda value: hex(value) if isinstance(value, int) else repr(value))
        self._expected: dict[tuple, Any] = {}      # (port, tag) -> value, not yet observed
        self._observed: set[tuple] = set()         # (port, tag) observed
        self._ports_of_tag: dict[Hashable, set] = defaultdict(set)
        self._position: dict[tuple, int] = {}                  # (port, tag) -> order of expect()
        self._expect_count: dict[Hashable, int] = defaultdict(int)
        self._latest: dict[Hashable, int] = {}                  # port -> latest position observed
        self.errors: list[ScoreboardError] = []
        self.matched = 0

    # -- bench side ---------------------------------------------------------------------------
    def expect(self, port, tag, value) -> None:
        key = (port, tag)
        if key in self._expected or key in self._observed:
            raise ValueError(f"{self.name}: tag {tag!r} expected twice at port {port}")
        self._expected[key] = value
        self._ports_of_tag[tag].add(port)
        if self.ordered:
            self._position[key] = self._expect_count[port]
            self._expect_count[port] += 1

    def observe(self, port, tag, value) -> ScoreboardError | None:
        """Record an item seen at ``port``; returns the error it caused, if any."""
        key = (port, tag)
        if key in self._expected:
            expected = self._expected.pop(key)
            self._observed.add(key)
            error = None
            if self.ordered:
                position, latest = self._position.pop(key), self._latest.get(port, -1)
                if position < latest:
                    error = self._error("reorder", port, tag, f"arrived after an item expected "
                                        f"{latest - position} place(s) later")
                self._latest[port] = max(position, latest)
            if not self._compare(expected, value):
                error = self._error("corruption", port, tag,
                                    f"expected {self._fmt(expected)}, got {self._fmt(value)}")
            if error is None:
                self.matched += 1
            return error
        if key in self._observed:
            return self._error("duplicate", port, tag, f"observed again ({self._fmt(value)})")
        if self._ports_of_tag.get(tag):
            ports = sorted(self._ports_of_tag[tag], key=str)
            return self._error("misroute", port, tag, f"belongs to port(s) {ports}")
        return self._error("corruption", port, tag,
                           f"tag never sent (corrupted tag or spurious item {self._fmt(value)})")

    @property
    def outstanding(self) -> int:
        """Items expected but not observed yet."""
        return len(self._expected)

    def losses(self) -> list[ScoreboardError]:
        return [ScoreboardError("loss", port, tag, f"expected {self._fmt(value)}, never observed")
                for (port, tag), value in self._expected.items()]

    def all_errors(self) -> list[ScoreboardError]:
        return self.errors + self.losses()

    def check(self, *, limit: int = 10) -> None:
        """Raise ``AssertionError`` listing errors by kind (losses included) if there are any."""
        errors = self.all_errors()
        if not errors:
            return
        counts = {kind: sum(e.kind == kind for e in errors) for kind in KINDS}
        summary = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        lines = [f"{self.name}: {summary} ({self.matched} matched)"]
        lines += [f"  {error}" for error in errors[:limit]]
        if len(errors) > limit:
            lines.append(f"  ... and {len(errors) - limit} more")
        raise AssertionError("\n".join(lines))

    def _error(self, kind, port, tag, detail) -> ScoreboardError:
        error = ScoreboardError(kind, port, tag, detail)
        self.errors.append(error)
        return error
