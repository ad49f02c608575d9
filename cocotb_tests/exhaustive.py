"""Every legal configuration of the base case Fred_m(3), for the exhaustive RTL check.

*Legal* here means what a configuration must be to run on the switch: every microswitch mode
legal and canonical (what the configuration checker and ``SwitchConfig.decode`` accept), and,
with a flit on every port whose input stage accepts one, nothing is dropped inside the network
and no configured sum lacks an operand (the functional model's own conditions,
``hdl.compiler.functional``: such a value would stay inside the switch for ever). Settings
that route nothing (an RD output or an output port selecting a wire that carries no data) are
included: they must produce nothing.

Fred_m(3) = ``in[0]`` (ports 0, 1), ``demux`` (port 2), m RD microswitches (sub-port 0 from
``in[0]``'s wire, sub-port 1 from the demux's), ``out[0]`` (ports 0, 1), ``mux`` (port 2).
:func:`legal_configurations` enumerates the configurations with an independent evaluator and
prunes each stage as soon as a value is lost; ``tests/cocotb_tests/test_switch_exhaustive.py`` checks that, for
Fred_2(3), the result is exactly the set of decodable configurations that the functional model
accepts (all 104,976 are tried). Counts: 8,869 for Fred_2(3), 213,669 for Fred_3(3).
"""

from __future__ import annotations

import itertools

from hdl.contracts.encoding import (DemuxMode, InputMode, MuxMode, OutputMode, RDMode, legal_modes,
                                        SwitchConfig)
from hdl.contracts.errors import FredError

__all__ = ["all_modes", "legal_configurations", "accepted_ports"]


#: Every legal, canonical mode of a microswitch class (the compiler's enumeration).
all_modes = legal_modes


def _rd_options(rds, x0, x1):
    """(mode, (out0 value, out1 value)) for each RD mode that keeps every value present."""
    options = []
    for rd in rds:
        sel = {0: None, 1: x0, 2: x1, 3: None if x0 is None or x1 is None else (x0, x1)}
        if 3 in (rd.out0, rd.out1) and sel[3] is None:
            continue   # a sum missing an operand
        if (x0 is not None and not {1, 3} & {rd.out0, rd.out1}) or \
                (x1 is not None and not {2, 3} & {rd.out0, rd.out1}):
            continue   # a value dropped in the RD microswitch
        options.append((rd, (sel[rd.out0], sel[rd.out1])))
    return options


def legal_configurations(middle: int, ports: int = 3):
    """Yield every legal configuration of Fred_m(3) (see the module docstring), in a fixed order."""
    if ports != 3:
        raise FredError("the exhaustive enumeration covers the base case Fred_m(3) only")
    ins, dms, rds = (all_modes(c, middle) for c in (InputMode, DemuxMode, RDMode))
    outs, mxs = all_modes(OutputMode, middle), all_modes(MuxMode, middle)
    for i0, dm in itertools.product(ins, dms):
        wires = [[None, None] for _ in range(middle)]   # wires[k][sub-port]
        if i0.reduce:
            wires[i0.in0_wire][0] = ("in[0]",)
        else:
            if i0.in0_en:
                wires[i0.in0_wire][0] = (0,)
            if i0.in1_en:
                wires[i0.in1_wire][0] = (1,)
        if dm.en:
            wires[dm.wire][1] = (2,)
        per_rd = [_rd_options(rds, *wires[k]) for k in range(middle)]
        for combo in itertools.product(*per_rd):
            sub = [values for _, values in combo]
            for om in outs:
                taken = {w for en, w in ((om.out0_en, om.out0_wire), (om.out1_en, om.out1_wire)) if en}
                if any(sub[k][0] is not None and k not in taken for k in range(middle)):
                    continue   # a wire into out[0] that no port takes
                for mx in mxs:
                    if any(sub[k][1] is not None and not (mx.en and mx.wire == k)
                           for k in range(middle)):
                        continue   # a wire into the mux that the last port does not take
                    yield SwitchConfig.compose(3, middle, [i0], [SwitchConfig(2, middle, (rd,))
                                                                  for rd, _ in combo], [om],
                                               demux=dm, mux=mx)


def accepted_ports(config: SwitchConfig) -> tuple[int, ...]:
    """Ports whose input stage takes a flit under ``config`` (Fred_m(P) with P >= 3)."""
    ports = []
    for u, mode in enumerate(config.input_modes):
        if mode.in0_en:
            ports.append(2 * u)
        if mode.in1_en:
            ports.append(2 * u + 1)
    if config.ports % 2 and config.demux.en:
        ports.append(config.ports - 1)
    return tuple(ports)
