"""Speed figures of the stack (``fred bench BENCH``, ``make bench-*``), printed, never asserted:

* :mod:`.sysmodel_speed` -- the system model: collective evaluations, ``fred eval``, the sweep;
* :mod:`.router_speed` -- the router at P = 64, and the routability report docs/routability.md;
* :mod:`.verilog_speed` -- Verilog generation, lint and the Verilator build of Fred_3(P);
* :mod:`.fabric_speed` -- fabric RTL simulation under Verilator, cycles per second.
"""
