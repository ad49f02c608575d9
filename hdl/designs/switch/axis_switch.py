"""``fred_axis_switch``: the FRED switch with AXI4-Stream port names (docs/switch.md, "AXI4-Stream
wrapper"), so it drops into a design built from AXI4-Stream IP."""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.config_port import ERROR_WIDTH, check_port_parameters, phase_index_width
from hdl.contracts.encoding import check_size
from hdl.contracts.flit import FlitFormat

from .switch_top import FredSwitchTop

__all__ = ["AxisSwitchTop"]


class AxisSwitchTop(wiring.Component):
    """:class:`FredSwitchTop` (same keyword-only parameters) with AXI4-Stream signal names; no
    logic of its own: every AXI4-Stream signal is a wire to the switch's stream member, so the
    latency, throughput (one beat per cycle per port) and backpressure are the switch's.

    Per port n (data beats; ``tdata`` = the flit's data, ``lanes`` elements of the dtype, lane 0
    in the low bits; ``tlast`` = the flit's ``last``; ``tuser`` = its tag, carried unchanged --
    the packet switch keeps its header there):
        ``s<n>_axis_tdata/tvalid/tready/tlast/tuser``: the slave (input) side of port n;
        ``m<n>_axis_tdata/tvalid/tready/tlast/tuser``: the master (output) side of port n.
    Configuration (``docs/switch.md``, "Configuration port"): ``s_cfg_axis_tdata`` (a
    configuration word), ``tlast`` (the packet's last word), ``tuser`` (the slot it is for),
    ``tvalid/tready``. Phase select: ``s_sel_axis_tdata`` (the slot), ``tvalid/tready``.
    Status, as :class:`FredSwitchTop`: ``busy``, ``error``, ``active_phase``, ``active_valid``,
    ``loaded``. AXI4-Stream's ``tkeep``/``tstrb``/``tid``/``tdest`` are not used (every beat is
    whole; routing comes from the configuration). ``aclk``/``aresetn`` are the design's clock and
    reset (Amaranth's ``clk``/``rst``, active high: invert ``aresetn``).
    """

    def __new__(cls, *, ports, middle, dtype, lanes, phases, tag_width, word_width):
        # the switch's own checks, before the object exists (FredSwitchTop.__new__ says why)
        check_size(ports, middle)
        FlitFormat(dtype=dtype, lanes=lanes, tag_width=tag_width)
        check_port_parameters(phases=phases, word_width=word_width)
        return super().__new__(cls)

    def __init__(self, **params):
        self.params = params
        switch = FredSwitchTop(**params)
        self.flit, self.ports, self.phases = switch.flit, switch.ports, switch.phases
        self.latency, self.stages = switch.latency, switch.stages
        self.config_words, self.select_cycles = switch.config_words, switch.select_cycles
        self._switch = switch
        data, tag = self.flit.data_width, self.flit.tag_width
        members = {}
        for n in range(self.ports):
            for side, into, outof in ((f"s{n}_axis", In, Out), (f"m{n}_axis", Out, In)):
                members |= {f"{side}_tdata": into(data), f"{side}_tvalid": into(1),
                            f"{side}_tready": outof(1), f"{side}_tlast": into(1),
                            f"{side}_tuser": into(tag)}
        word = params["word_width"]
        members |= {"s_cfg_axis_tdata": In(word), "s_cfg_axis_tvalid": In(1), "s_cfg_axis_tready": Out(1),
                    "s_cfg_axis_tlast": In(1), "s_cfg_axis_tuser": In(phase_index_width(self.phases)),
                    "s_sel_axis_tdata": In(phase_index_width(self.phases)), "s_sel_axis_tvalid": In(1),
                    "s_sel_axis_tready": Out(1),
                    "busy": Out(1), "error": Out(ERROR_WIDTH),
                    "active_phase": Out(phase_index_width(self.phases)), "active_valid": Out(1),
                    "loaded": Out(self.phases)}
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        sw = m.submodules.switch = self._switch
        for n in range(self.ports):
            s, o = f"s{n}_axis", f"m{n}_axis"
            m.d.comb += [
                sw.i[n].valid.eq(getattr(self, f"{s}_tvalid")),
                sw.i[n].payload.data.eq(getattr(self, f"{s}_tdata")),
                sw.i[n].payload.last.eq(getattr(self, f"{s}_tlast")),
                sw.i[n].payload.tag.eq(getattr(self, f"{s}_tuser")),
                getattr(self, f"{s}_tready").eq(sw.i[n].ready),
                getattr(self, f"{o}_tvalid").eq(sw.o[n].valid),
                getattr(self, f"{o}_tdata").eq(sw.o[n].payload.data),
                getattr(self, f"{o}_tlast").eq(sw.o[n].payload.last),
                getattr(self, f"{o}_tuser").eq(sw.o[n].payload.tag),
                sw.o[n].ready.eq(getattr(self, f"{o}_tready")),
            ]
        m.d.comb += [
            sw.config.valid.eq(self.s_cfg_axis_tvalid),
            sw.config.payload.data.eq(self.s_cfg_axis_tdata),
            sw.config.payload.last.eq(self.s_cfg_axis_tlast),
            sw.config.payload.phase.eq(self.s_cfg_axis_tuser),
            self.s_cfg_axis_tready.eq(sw.config.ready),
            sw.phase.valid.eq(self.s_sel_axis_tvalid),
            sw.phase.payload.eq(self.s_sel_axis_tdata),
            self.s_sel_axis_tready.eq(sw.phase.ready),
            self.busy.eq(sw.busy), self.error.eq(sw.error), self.active_phase.eq(sw.active_phase),
            self.active_valid.eq(sw.active_valid), self.loaded.eq(sw.loaded),
        ]
        return m
