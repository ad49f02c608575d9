"""The packet switch's host ordering rule for reductions, as a checker a sender (a bench's
link model, a fabric engine) runs as it starts each packet (``docs/switch.md``, "Packet
switch", "Host rules").

Why a rule: a stored phase that reduces inputs A and B lets A's packet s enter the datapath
on its own; its flits then wait inside for B's packet s. If B's buffer of that VC holds a
packet of another phase ahead of its packet s, that packet can never start (the datapath must
be empty before another phase is selected) and B's packet s is behind it: the switch hangs. The
switch cannot see it coming (a packet of another phase may arrive at B after A's started), so
the senders must not create it:

    **On a VC, once one input of a reduction has started its packet s, every other input of
    that reduction sends its own packet s before any packet of another phase on that VC.**

Which inputs reduce together the switch learns from the headers only: the inputs that send
packets of one ``(phase, vc, flow)`` are that flow's inputs (a flow id names one flow of a
phase; a reduction's inputs share it and number their packets alike, which the switch's drain
rule relies on as well). Pure Python (stdlib only).
"""

from __future__ import annotations

from collections import defaultdict

from hdl.contracts.errors import FredError
from hdl.contracts.packet import DATA_VCS, Packet

__all__ = ["ReductionOrder"]


class ReductionOrder:
    """Checks the rule above over a traffic plan, packet start by packet start.

    Parameters:
        plan: every ``(port, Packet)`` the senders will send (any order); the flows with two or
            more input ports among them are the reductions (multi-input flows) the rule guards.
        served: the phase indices the switch serves (its loaded slots, and the default index
            when it routes online); None = every phase. A packet of another phase is dropped
            at the input and never queues, so the rule ignores it.

    :meth:`start` is called when a sender starts a packet (in the order the packets start; a
    sender's packets on one VC in their link order). It raises :class:`FredError` naming the
    port, the phase it starts and the reduction it would leave behind when the rule is broken.
    """

    def __init__(self, plan, served=None):
        self.served = None if served is None else frozenset(served)
        inputs = defaultdict(set)
        for port, packet in plan:
            if not isinstance(packet, Packet):
                raise FredError(f"the plan holds (port, Packet) pairs, got {packet!r} at port {port!r}")
            if self._queues(packet):
                inputs[_key(packet)].add(port)
        #: (phase, vc, flow) -> the flow's input ports, for the flows with two or more inputs
        self.reductions = {key: frozenset(ports) for key, ports in inputs.items() if len(ports) > 1}
        self._by_port = defaultdict(list)
        for key, ports in self.reductions.items():
            for port in ports:
                self._by_port[port].append(key)
        self._started = defaultdict(int)     # (key, port) -> packets started

    def start(self, port: int, packet: Packet) -> None:
        """Record that ``port`` starts ``packet``; raise if the rule forbids it now."""
        if not self._queues(packet):
            return
        key = _key(packet)
        for other in self._by_port.get(port, ()):
            if other == key or other[1] != packet.vc:
                continue
            mine = self._started[other, port]
            ahead = max(self._started[other, p] for p in self.reductions[other])
            if ahead > mine:
                raise FredError(
                    f"input {port} starts a packet of phase {packet.phase} on VC {packet.vc} while "
                    f"the reduction of phase {other[0]} flow {other[2]} on that VC has its packet "
                    f"{mine} (counted from 0) started at another input and not yet at input {port}: "
                    f"the switch would hang (docs/switch.md, Packet switch, host rules: send the "
                    f"reduction's packet first, or the other phase on another VC)")
        if key in self.reductions:
            self._started[key, port] += 1


    def _queues(self, packet: Packet) -> bool:
        """The packet is stored in a data VC buffer (not dropped, not a control packet)."""
        return packet.vc in DATA_VCS and (self.served is None or packet.phase in self.served)


def _key(packet: Packet) -> tuple:
    return packet.phase, int(packet.vc), packet.flow
