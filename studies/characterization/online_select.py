"""Online-routing figures of the packet switch (``hdl/designs/switch/packet_switch.py`` built
with ``online``; docs/switch.md, "Online unicast routing"), measured in Amaranth's simulator.

:func:`measure_online_select` runs two scenarios on Fred_m(P) with the paper's packet and
buffer sizes, every packet a unicast of the default phase index:

* **one, then another**: input 0 sends a packet to output 1 at an idle switch (the active
  phase is not the default index), then, once it is through, input 2 a packet to output 3;
* **two at once**: inputs 0 and 2 send a packet each to outputs 1 and 3 in the same cycle.

Figures (cycles from a packet's first flit at its input buffer's head, one cycle after its
link transfer, to that flit at the output):

* ``online_first_cycles``: the first packet at the idle switch;
* ``online_select_cycles`` = that minus the same for the second packet of "one, then
  another" (the switch is then in the default index: only a path to set up): the select of
  the default index;
* ``online_path_setup_cycles``: in "two at once", the later packet's figure minus the
  earlier one's: paths are set up one per cycle.
"""

from __future__ import annotations

from hdl.contracts.errors import FredError
from hdl.contracts.packet import VC, PacketFormat, packetize, paper_flits
from hdl.designs.switch.packet_switch import PacketSwitch

from cocotb_tests.packet_sim import Injection, run_packet_switch

__all__ = ["measure_online_select"]


def measure_online_select(*, ports: int = 8, middle: int = 3, dtype: str = "fp16",
                          second_at: int = 80) -> dict:
    """The figures above at Fred_``middle``(``ports``) ``dtype``; raises :class:`FredError`
    if a packet is lost, misrouted or altered, or the second packet of "one, then another"
    overlaps the first."""
    if ports < 4:
        raise FredError(f"the online scenarios use inputs 0, 2 and outputs 1, 3: ports >= 4, got {ports}")
    sizes = paper_flits()
    fmt = PacketFormat(phase_bits=2, seq_bits=8, flow_bits=4, packet_flits=sizes["data_packet"],
                       dest_bits=max(1, (ports - 1).bit_length()))
    data = {src: [(src << 8) + i for i in range(fmt.packet_flits)] for src in (0, 2)}

    def packet(src, dst, at):
        return Injection(src, at, packetize(fmt, data[src], phase=fmt.online_phase, vc=VC.DP,
                                            flow=src, dest=dst)[0])

    def run(injections):
        dut = PacketSwitch(ports=ports, middle=middle, dtype=dtype, lanes=1, phases=2, packet=fmt,
                           depth=sizes["data_vc_buffer"], online=True)
        result = run_packet_switch(dut, configs=[None, None], injections=injections)
        delays = {}
        for src, dst in ((0, 1), (2, 3)):
            got = [d for _, d, _, _ in result.received[dst]]
            if got != data[src]:
                raise FredError(f"packet switch (online): output {dst} received {got}, not input "
                                f"{src}'s packet")
            head = min(c for c, *_ in result.sent[src]) + 1
            delays[src] = min(c for c, *_ in result.received[dst]) - head
        return dut, result, delays

    dut, first_run, one_then = run([packet(0, 1, 0), packet(2, 3, second_at)])
    if max(c for c, *_ in first_run.received[1]) >= second_at:
        raise FredError(f"second_at={second_at}: the first packet is not through by then")
    _, _, together = run([packet(0, 1, 0), packet(2, 3, 0)])
    return {
        "online_point": {"ports": ports, "middle": middle, "dtype": dtype,
                         "packet_flits": fmt.packet_flits, "second_at": second_at},
        "online_first_cycles": float(one_then[0]),
        "online_select_cycles": float(one_then[0] - one_then[2]),
        "online_path_setup_cycles": float(abs(together[2] - together[0])),
        "online_selected_latency_cycles": float(one_then[2]),
    }
