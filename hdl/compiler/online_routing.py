"""Online unicast routing of Fred_m(P): the reference model of the packet switch's default
phase index (``docs/switch.md``, "Online unicast routing").

A packet of the default ("online") phase names its destination port in its header; the switch
sets up a path for it when its first flit is about to enter and releases it when its last flit
has left. A path is set up level by level, as the hardware does in one cycle
(the RTL, :class:`hdl.designs.switch.online_router.OnlineRouter`): at a level of P ports, input port ``i``
enters input microswitch ``i // 2`` (or, odd P's last port, the demux), output port ``o``
leaves output microswitch ``o // 2`` (or the mux); the **lowest** middle subnetwork ``k`` whose
link from that input microswitch and whose link to that output microswitch are both free is
chosen, and the request recurses into ``mid[k]`` from sub-port ``i // 2`` to sub-port
``o // 2``; Fred_m(2) is an RD microswitch (``out[o] = in[i]``).

Strict-sense non-blocking at m >= 3: an input microswitch has 2 ports, so when input ``i`` is
free at most one other path uses one of its m links; the same holds at the output
microswitch; with m >= 3 = 2n - 1 (n = 2, Clos) some middle has both links free, whatever
paths exist and however they were chosen, and its sub-ports are then free, so the argument
recurses. The demux / mux port has a microswitch of its own (one port), so it never blocks.
At m = 2 a request can block (:meth:`OnlineRoutingModel.route` returns ``None``);
``tests/hdl/compiler/test_online_router.py`` checks both.

The model keeps the modes of every microswitch (the configuration vector the hardware keeps
in a register) and builds the :class:`~hdl.contracts.encoding.SwitchConfig` of the current
paths (:meth:`OnlineRoutingModel.config`), which the golden functional model
(:func:`hdl.compiler.functional.symbolic`) can check. Pure Python.
"""

from __future__ import annotations

from hdl.contracts.encoding import (RD_IN0, RD_NONE, DemuxMode, InputMode, MuxMode,
                                        OutputMode, RDMode, SwitchConfig, check_size)
from hdl.contracts.errors import FredError

__all__ = ["OnlineRoutingModel"]


class OnlineRoutingModel:
    """Unicast paths through Fred_m(P), set up and released one at a time.

    Parameters: ports P >= 2, middle m >= 2.

    ``route(src, dst)`` sets up a path (returns the middle chosen at each level, top first, or
    ``None`` if blocked: only possible at m = 2); ``release(dst)`` removes the path ending at
    ``dst`` and returns its source. Errors (:class:`FredError`): a port out of range, an input
    or output already on a path, releasing a free output.
    """

    def __init__(self, ports: int, middle: int):
        check_size(ports, middle)
        self.ports, self.middle = ports, middle
        self._modes: dict[str, dict] = {}
        self._src_of: dict[int, int] = {}     # dst -> src

    # ---- mode state: {slot name: mutable field dict} -----------------------------------------
    def _mode(self, name: str, kind: str) -> dict:
        if name not in self._modes:
            defaults = {"input": dict(in0_en=0, in0_wire=0, in1_en=0, in1_wire=0, reduce=0),
                        "output": dict(out0_en=0, out0_wire=0, out1_en=0, out1_wire=0),
                        "rd": dict(out0=RD_NONE, out1=RD_NONE),
                        "demux": dict(en=0, wire=0), "mux": dict(en=0, wire=0)}
            self._modes[name] = dict(defaults[kind])
        return self._modes[name]

    def _check_port(self, value, name: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.ports:
            raise FredError(f"{name} must be a port in 0..{self.ports - 1}, got {value!r}")
        return value

    @property
    def paths(self) -> dict[int, int]:
        """``{dst: src}`` of the paths set up."""
        return dict(self._src_of)

    def route(self, src: int, dst: int) -> list[int] | None:
        """Set up a path ``src -> dst``; returns the middle index chosen at each level (top
        first), or ``None`` (nothing changed) if no middle subnetwork is free at some level."""
        self._check_port(src, "src")
        self._check_port(dst, "dst")
        if dst in self._src_of:
            raise FredError(f"output {dst} already has a path (from input {self._src_of[dst]})")
        if src in self._src_of.values():
            raise FredError(f"input {src} already has a path")
        saved = {name: dict(fields) for name, fields in self._modes.items()}
        choices: list[int] = []
        if not self._route(self.ports, "", src, dst, choices):
            self._modes = saved
            return None
        self._src_of[dst] = src
        return choices

    def release(self, dst: int) -> int:
        """Remove the path ending at ``dst``; returns its source."""
        self._check_port(dst, "dst")
        if dst not in self._src_of:
            raise FredError(f"output {dst} has no path to release")
        src = self._release(self.ports, "", dst)
        if src != self._src_of[dst]:   # the traceback must find the path route() set up
            raise FredError(f"internal: released path to {dst} came from {src}, not "
                            f"{self._src_of[dst]}")
        del self._src_of[dst]
        return src

    def config(self) -> SwitchConfig:
        """The configuration of the current paths (idle microswitches elsewhere)."""
        kinds = {"input": InputMode, "output": OutputMode, "rd": RDMode, "demux": DemuxMode,
                 "mux": MuxMode}
        modes = {}
        for name, fields in self._modes.items():
            kind = _kind_of(name)
            modes[name] = kinds[kind](**fields)
        return SwitchConfig.from_modes(self.ports, self.middle, modes)

    # ---- one level ------------------------------------------------------------------------
    def _in_links(self, prefix: str, P: int, src: int) -> set[int]:
        """Middles whose link from ``src``'s input microswitch is used."""
        r = P // 2
        if src == 2 * r:   # the demux: a microswitch of its own
            d = self._mode(prefix + "demux", "demux")
            return {d["wire"]} if d["en"] else set()
        ms = self._mode(f"{prefix}in[{src // 2}]", "input")
        return {ms[f"in{n}_wire"] for n in (0, 1) if ms[f"in{n}_en"]}

    def _out_links(self, prefix: str, P: int, dst: int) -> set[int]:
        r = P // 2
        if dst == 2 * r:
            x = self._mode(prefix + "mux", "mux")
            return {x["wire"]} if x["en"] else set()
        ms = self._mode(f"{prefix}out[{dst // 2}]", "output")
        return {ms[f"out{n}_wire"] for n in (0, 1) if ms[f"out{n}_en"]}

    def _route(self, P: int, prefix: str, src: int, dst: int, choices: list) -> bool:
        if P == 2:
            rd = self._mode(prefix + "rd", "rd")
            rd[f"out{dst}"] = RD_IN0 + src
            return True
        r = P // 2
        used = self._in_links(prefix, P, src) | self._out_links(prefix, P, dst)
        free = [k for k in range(self.middle) if k not in used]
        if not free:
            return False
        k = free[0]
        choices.append(k)
        if src == 2 * r:
            self._mode(prefix + "demux", "demux").update(en=1, wire=k)
        else:
            self._mode(f"{prefix}in[{src // 2}]", "input").update(
                {f"in{src % 2}_en": 1, f"in{src % 2}_wire": k})
        if dst == 2 * r:
            self._mode(prefix + "mux", "mux").update(en=1, wire=k)
        else:
            self._mode(f"{prefix}out[{dst // 2}]", "output").update(
                {f"out{dst % 2}_en": 1, f"out{dst % 2}_wire": k})
        return self._route(r + P % 2, f"{prefix}mid[{k}].", src // 2, dst // 2, choices)

    def _release(self, P: int, prefix: str, dst: int) -> int:
        if P == 2:
            rd = self._mode(prefix + "rd", "rd")
            src = rd[f"out{dst}"] - RD_IN0
            rd[f"out{dst}"] = RD_NONE
            return src
        r = P // 2
        if dst == 2 * r:
            x = self._mode(prefix + "mux", "mux")
            k = x["wire"]
            x.update(en=0, wire=0)
        else:
            ms = self._mode(f"{prefix}out[{dst // 2}]", "output")
            k = ms[f"out{dst % 2}_wire"]
            ms.update({f"out{dst % 2}_en": 0, f"out{dst % 2}_wire": 0})
        u = self._release(r + P % 2, f"{prefix}mid[{k}].", dst // 2)
        if u == r:   # the demux's sub-port
            self._mode(prefix + "demux", "demux").update(en=0, wire=0)
            return 2 * r
        ms = self._mode(f"{prefix}in[{u}]", "input")
        lane = 0 if ms["in0_en"] and ms["in0_wire"] == k else 1
        ms.update({f"in{lane}_en": 0, f"in{lane}_wire": 0})
        return 2 * u + lane


def _kind_of(name: str) -> str:
    last = name.rsplit(".", 1)[-1]
    if last.startswith("in["):
        return "input"
    if last.startswith("out["):
        return "output"
    return last   # rd, demux, mux
