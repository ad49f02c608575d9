"""Each output picks one input stream; several outputs may pick the same input (broadcast)."""

from __future__ import annotations

from amaranth import Module, Shape, Signal
from amaranth.hdl import Cat, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError

__all__ = ["SelectFork"]


class SelectFork(wiring.Component):
    """Combinational select/broadcast with a per-output pending mask (an eager fork).

    Parameters:
        shape: payload shape.
        inputs, outputs: number of input and output streams (>= 1).

    Members:
        i: ``In(stream.Signature(shape)).array(inputs)``.
        o: ``Out(stream.Signature(shape)).array(outputs)``.
        enable: ``In(outputs)``, bit j: output j takes an input.
        select: ``In(unsigned(sel_width)).array(outputs)``: the input output j takes.
        busy: ``Out(1)``, some output took the current flit of its input and waits for the others.

    Behaviour: an input flit is consumed once every enabled output selecting it has taken it;
    ``taken[j]`` remembers that output j already took the flit, so no output sees it twice.
    An input that no enabled output selects is never consumed (``ready`` low): flits wait, they
    are never dropped. ``enable``/``select`` must only change while the fork holds no flits.

    Latency: 0 (combinational). ``o[j].valid`` depends on the input valids and ``taken`` only,
    never on any ``ready``; ``i[k].ready`` depends on ``o[*].ready``. Put registered buffers
    on the outputs.
    """

    def __init__(self, shape, *, inputs: int, outputs: int):
        for name, value in (("inputs", inputs), ("outputs", outputs)):
            if not isinstance(value, int) or value < 1:
                raise FredError(f"SelectFork {name} must be an integer >= 1, got {value!r}")
        Shape.cast(shape)
        self._shape = shape
        self._inputs = inputs
        self._outputs = outputs
        self.sel_width = max(1, (inputs - 1).bit_length())
        super().__init__({
            "i": In(stream.Signature(shape)).array(inputs),
            "o": Out(stream.Signature(shape)).array(outputs),
            "enable": In(outputs),
            "select": In(unsigned(self.sel_width)).array(outputs),
            "busy": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        n_in, n_out = self._inputs, self._outputs
        taken = [Signal(name=f"taken{j}") for j in range(n_out)]
        # targets[k][j]: enabled output j selects input k
        targets = [[Signal(name=f"in{k}_to_out{j}") for j in range(n_out)] for k in range(n_in)]
        for k in range(n_in):
            for j in range(n_out):
                m.d.comb += targets[k][j].eq(self.enable[j] & (self.select[j] == k))
        fires = []
        for k in range(n_in):
            served = [~targets[k][j] | taken[j] | self.o[j].ready for j in range(n_out)]
            m.d.comb += self.i[k].ready.eq(Cat(*(targets[k])).any() & Cat(*served).all())
            fire = Signal(name=f"in{k}_fire")
            m.d.comb += fire.eq(self.i[k].valid & self.i[k].ready)
            fires.append(fire)
        for j in range(n_out):
            chosen_valid = Cat(*(targets[k][j] & self.i[k].valid for k in range(n_in))).any()
            m.d.comb += self.o[j].valid.eq(chosen_valid & ~taken[j])
            # Payload mux; out-of-range selects (never valid, see above) fall on the last input
            # so that the case statement is complete.
            with m.Switch(self.select[j]):
                for k in range(n_in - 1):
                    with m.Case(k):
                        m.d.comb += self.o[j].payload.eq(self.i[k].payload)
                with m.Default():
                    m.d.comb += self.o[j].payload.eq(self.i[n_in - 1].payload)
            input_fire = Cat(*(targets[k][j] & fires[k] for k in range(n_in))).any()
            with m.If(input_fire):
                m.d.sync += taken[j].eq(0)
            with m.Elif(self.o[j].valid & self.o[j].ready):
                m.d.sync += taken[j].eq(1)
        m.d.comb += self.busy.eq(Cat(*taken).any())
        return m
