"""The Verilog emitter: deterministic, hierarchical Verilog of any Amaranth component (one
module per distinct component, :mod:`hdl.emit.hierarchy`; :func:`hdl.emit.verilog.to_verilog`).
The designs mark their modules with :class:`~hdl.emit.hierarchy.Hierarchy`, so this package sits
below :mod:`hdl.designs` and knows none of them.

Imports: :mod:`hdl.contracts`, amaranth.
"""
