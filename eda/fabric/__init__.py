"""Verilator builds of the wafer fabric RTL: one model with only the top's ports public
(:mod:`eda.fabric.build`), or the fabric cut at its uplinks into two parts
(:mod:`hdl.contracts.fabric_partition`) run one per core in lock step (:mod:`eda.fabric.lockstep`,
driver ``lockstep.cpp``)."""
