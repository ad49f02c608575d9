"""The hardware: everything from the bit layouts to the Verilog, in four sub-packages by role.

Bottom up (``tests/test_layering.py`` enforces the direction):

* :mod:`hdl.contracts` -- pure Python every layer shares: the error type, the element formats
  and their golden arithmetic, bit layouts as tables, the switch's flit, configuration port
  and configuration encoding, packet and latency, rank placement, the fabric's description and
  its two-part partition, the characterization schema;
* :mod:`hdl.compiler` -- pure Python: the configuration compiler (flows, routing onto
  Fred_m(P), functional model, collective lowering, online-routing reference model) and the
  RTL fabric's engine programs and their golden data;
* :mod:`hdl.emit` -- the Verilog emitter (hierarchical: one module per distinct component;
  the designs mark their modules with its :class:`~hdl.emit.hierarchy.Hierarchy`);
* :mod:`hdl.designs` -- the Amaranth designs, one component per file (switch, reduction,
  packet switch, fabric, stream buffer) and the registry ``fred verilog`` emits from.
"""
