"""Flows: what one communication phase asks the switch to do.

A :class:`Flow` is a set of input ports and a set of output ports: every output port
receives the element-wise sum of the data entering on the input ports. Flows that run in
the same phase must use disjoint input ports and disjoint output ports
(:func:`validate_flows`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from hdl.contracts.errors import FredError

__all__ = ["Flow", "validate_flows", "parse_flows", "format_flows", "check_ports"]


def _port_tuple(ports, what: str) -> tuple[int, ...]:
    if isinstance(ports, (str, bytes)) or not hasattr(ports, "__iter__"):
        raise FredError(f"flow {what} must be a collection of port numbers, got {ports!r}")
    values = []
    for port in ports:
        if isinstance(port, bool) or not isinstance(port, int):
            try:
                import numpy as np
                if isinstance(port, np.integer):
                    port = int(port)
                else:
                    raise TypeError
            except TypeError:
                raise FredError(f"flow {what}: port {port!r} is not an integer") from None
        if port < 0:
            raise FredError(f"flow {what}: port {port} is negative")
        values.append(port)
    if not values:
        raise FredError(f"flow {what} is empty: a flow needs at least one input and one output port")
    if len(set(values)) != len(values):
        dup = sorted({p for p in values if values.count(p) > 1})
        raise FredError(f"flow {what} list port(s) {dup} more than once")
    return tuple(sorted(values))


@dataclass(frozen=True)
class Flow:
    """One flow: every port in ``outputs`` receives the sum of the data on ``inputs``.

    Members:
        inputs: sorted tuple of distinct input port numbers (non-empty).
        outputs: sorted tuple of distinct output port numbers (non-empty).

    Any iterable of ints is accepted and normalised to a sorted tuple, so
    ``Flow(inputs=[2, 0], outputs={1})`` equals ``Flow(inputs=(0, 2), outputs=(1,))``.
    Port range is checked against the switch size when routing (:func:`check_ports`).
    """

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "inputs", _port_tuple(self.inputs, "inputs"))
        object.__setattr__(self, "outputs", _port_tuple(self.outputs, "outputs"))

    def __str__(self) -> str:
        return f"{','.join(map(str, self.inputs))}>{','.join(map(str, self.outputs))}"

    def to_dict(self) -> dict:
        return {"inputs": list(self.inputs), "outputs": list(self.outputs)}


def check_ports(flows: Iterable[Flow], ports: int) -> None:
    """Raise if any flow names a port outside ``0 .. ports-1``."""
    for flow in flows:
        for what, group in (("input", flow.inputs), ("output", flow.outputs)):
            bad = [p for p in group if p >= ports]
            if bad:
                raise FredError(f"flow {flow}: {what} port(s) {bad} out of range for a "
                                f"{ports}-port switch (ports are 0..{ports - 1})")


def validate_flows(flows: Iterable[Flow], ports: int | None = None) -> list[Flow]:
    """Check that ``flows`` can share one phase; returns them as a list.

    Raises :class:`FredError` naming the problem if an element is not a :class:`Flow`, if
    two flows share an input port or an output port, or (with ``ports``) a port is out of
    range. An empty list is rejected: a phase must do something. A string is parsed with
    :func:`parse_flows` (``"0,1>0,1; 2>3"``).
    """
    if isinstance(flows, str):
        flows = parse_flows(flows)
    if flows is None or not hasattr(flows, "__iter__"):
        raise FredError(f"flows must be a list of Flow objects (or a string like '0,1>0,1; 2>3'), "
                        f"got {flows!r}")
    flows = list(flows)
    if not flows:
        raise FredError("no flows given: a phase needs at least one flow")
    for flow in flows:
        if not isinstance(flow, Flow):
            raise FredError(f"expected Flow objects, got {type(flow).__name__}: {flow!r}")
    if ports is not None:
        check_ports(flows, ports)
    for what, attr in (("input", "inputs"), ("output", "outputs")):
        owner: dict[int, Flow] = {}
        for flow in flows:
            for port in getattr(flow, attr):
                if port in owner:
                    raise FredError(f"flows {owner[port]} and {flow} overlap: both use {what} "
                                    f"port {port} (flows in one phase need disjoint {what}s)")
                owner[port] = flow
    return flows


def parse_flows(text: str) -> list[Flow]:
    """Parse ``"0,1,2>0,1,2; 3>4,5"`` (flows separated by ``;``, inputs ``>`` outputs).

    Port ranges ``a-b`` are accepted (``"0-3>0-3"``). Errors name the offending flow text.
    """
    flows = []
    for chunk in text.split(";"):
        chunk = chunk.strip()
        if not chunk:
            continue
        if chunk.count(">") != 1:
            raise FredError(f"flow {chunk!r}: expected INPUTS>OUTPUTS, e.g. '0,1>0,1'")
        left, right = chunk.split(">")
        try:
            flows.append(Flow(inputs=_parse_ports(left), outputs=_parse_ports(right)))
        except FredError as exc:
            raise FredError(f"flow {chunk!r}: {exc}") from None
    if not flows:
        raise FredError(f"no flows in {text!r}; expected e.g. '0,1,2>0,1,2; 3>4,5'")
    return flows


def _parse_ports(text: str) -> list[int]:
    ports = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            if "-" in item:
                low, high = (int(x) for x in item.split("-"))
                if high < low:
                    raise FredError(f"empty port range {item!r}")
                ports.extend(range(low, high + 1))
            else:
                ports.append(int(item))
        except ValueError:
            raise FredError(f"{item!r} is not a port number") from None
    return ports


def format_flows(flows: Iterable[Flow]) -> str:
    """Inverse of :func:`parse_flows`."""
    return "; ".join(str(flow) for flow in flows)
