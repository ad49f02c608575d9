"""FRED in silicon and in numbers: command-line entry point and shared plumbing.

The work lives in three packages:

* :mod:`hdl` -- Amaranth designs and the switch's configuration compiler;
* :mod:`cocotb_tests` -- cocotb benches and the verification library they share;
* :mod:`sysmodel` -- the wafer-scale system model.

This package only holds what all of them share: the ``fred`` command line
(:mod:`fred.cli`, one module per subcommand in :mod:`fred.commands`), the error
type for bad input (:mod:`hdl.base.errors`) and the Verilator locator
(:mod:`cocotb_tests.toolchain`).
"""
