"""The Amaranth designs, one component per file.

* :mod:`hdl.designs.switch` -- Fred_m(P): microswitches, the recursive datapath, configuration
  memory and checker, the packet switch (virtual channels, control unit, online router);
* :mod:`hdl.designs.reduction` -- the pipelined adders of the reduction unit;
* :mod:`hdl.designs.fabric` -- the wafer fabric: links, NPU engines, phase sequencers, top;
* :mod:`hdl.designs.stream_buffer` -- a full-throughput registered stream buffer;
* :mod:`hdl.designs.layouts` -- the ``StructLayout`` s made from :mod:`hdl.contracts.bitfields`;
* :mod:`hdl.designs.registry` -- every top-level design ``fred verilog`` emits, with its
  defaults.

Imports: :mod:`hdl.contracts`, :mod:`hdl.compiler`, :mod:`hdl.emit` (the hierarchy marks), amaranth.
"""
