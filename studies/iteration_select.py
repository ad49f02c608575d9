"""The cases of the iteration table one by one, and the ``--only`` filter that picks some of them
(``fred fabric-iteration --table --only ...``, ``--list-cases``; docs/fabric_iteration.md,
"The table in pieces").

A *table case* is one RTL run of the table: a workload and strategy at a scale K (and samples
per DP replica) on one fabric with one kind of switches. :func:`table_units` unrolls
:data:`studies.iteration_table.ITERATION_CASES` into them in the order the table builds them
(every circuit case -- the mesh's and the circuit FRED fabric's -- then every packet case).

Filter syntax: ``--only TERM[,TERM...]``, repeatable; a term is ``KEY=VALUE`` with KEY one of
``workload``, ``strategy``, ``scale``, ``fabric``, ``switch``, or a bare VALUE that names its key
by itself (``resnet-152``, ``MP4-DP5``, ``1000``, ``fred-b``, ``packet``). A case is selected when,
for every key the terms name, it has one of that key's values: values of one key are
alternatives, different keys must all hold (``--only resnet-152,gpt-3 --only fred-b`` is
resnet-152 or GPT-3, on Fred-B). A strategy may omit ``-PP1``; the mesh's switch is ``circuit``
(as ``--switch``'s default). A value no case has is an error listing the values that exist.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hdl.contracts.errors import FredError

__all__ = ["TableCase", "FILTER_KEYS", "table_units", "parse_only", "select_units"]

#: The keys a filter term may name, in the order a case's name lists them.
FILTER_KEYS = ("workload", "strategy", "scale", "fabric", "switch")


@dataclass(frozen=True)
class TableCase:
    """One RTL run of the iteration table: ``scale`` is K as run (the command's ``--scale``
    where the table's case names none), ``samples`` the case's samples per DP replica (None: the
    command's ``--samples-per-dp`` or the workload's)."""

    workload: str
    strategy: str
    scale: float
    samples: int | None
    fabric: str
    switch: str

    @property
    def name(self) -> str:
        """The case as the listing and the row store name it: ``resnet-152 MP1-DP20-PP1 K=1000
        fred-b circuit``."""
        return f"{self.workload} {self.strategy} K={self.scale:g} {self.fabric} {self.switch}"

    def to_dict(self) -> dict:
        return asdict(self)


def table_units(cases, default_scale: float) -> list[TableCase]:
    """Every RTL run of ``cases`` (``ITERATION_CASES``' tuples), circuit ones first, K as
    ``default_scale`` where a case has none."""
    circuit = [TableCase(w, s, float(k or default_scale), n, f, "circuit")
               for w, s, fabrics, k, n, _ in cases for f in fabrics]
    packet = [TableCase(w, s, float(k or default_scale), n, f, "packet")
              for w, s, _, k, n, packet_fabrics in cases for f in packet_fabrics]
    return circuit + packet


def _value(key: str, text: str):
    """A term's value as the case holds it: K a number, a strategy with its ``-PP1``."""
    if key == "scale":
        try:
            return float(text.replace("_", ""))
        except ValueError:
            raise FredError(f"--only: scale {text!r} is not a number") from None
    if key == "strategy" and text.upper().count("-") == 1:
        return text.upper() + "-PP1"
    return text.upper() if key == "strategy" else text.lower()


def _existing(units) -> dict[str, list]:
    return {key: list(dict.fromkeys(getattr(u, key) for u in units)) for key in FILTER_KEYS}


def _shown(key: str, values) -> str:
    return ", ".join(f"{v:g}" if key == "scale" else str(v) for v in values)


def _bare_key(text: str, existing: dict) -> str:
    """The key a bare value names (the one key among whose values it is)."""
    keys = []
    for key in FILTER_KEYS:
        try:
            if _value(key, text) in existing[key]:
                keys.append(key)
        except FredError:
            continue
    if len(keys) != 1:
        listed = "; ".join(f"{key}: {_shown(key, existing[key])}" for key in FILTER_KEYS)
        why = "names no case" if not keys else f"is ambiguous ({' or '.join(keys)}; write KEY=VALUE)"
        raise FredError(f"--only: {text!r} {why}; the table's cases have {listed}")
    return keys[0]


def parse_only(terms, units) -> dict[str, set]:
    """``--only``'s arguments (each one or more comma-separated terms) as {key: values};
    a key or value no case of ``units`` has is an error listing the ones that exist."""
    existing = _existing(units)
    wanted: dict[str, set] = {}
    for argument in terms or ():
        for term in filter(None, (t.strip() for t in argument.split(","))):
            if "=" in term:
                key, text = (p.strip() for p in term.split("=", 1))
                if key not in FILTER_KEYS:
                    raise FredError(f"--only: unknown key {key!r} in {term!r}; the keys are "
                                    f"{', '.join(FILTER_KEYS)}")
            else:
                key, text = _bare_key(term, existing), term
            value = _value(key, text)
            if value not in existing[key]:
                raise FredError(f"--only: no case has {key} {text!r}; the table's {key}s are "
                                f"{_shown(key, existing[key])}")
            wanted.setdefault(key, set()).add(value)
    return wanted


def select_units(units, terms) -> list[TableCase]:
    """The cases of ``units`` that ``--only``'s ``terms`` select (all of them for no terms);
    an error when the terms, each valid, select no case together."""
    wanted = parse_only(terms, units)
    chosen = [u for u in units if all(getattr(u, key) in values for key, values in wanted.items())]
    if not chosen:
        raise FredError(f"{' '.join('--only ' + t for t in terms)}: no case of the table has all of "
                        + "; ".join(f"{key} {_shown(key, sorted(v, key=str))}" for key, v in wanted.items()))
    return chosen
