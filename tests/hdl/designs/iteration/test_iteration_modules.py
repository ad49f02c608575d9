"""The packet I/O iteration top's per-endpoint components are one Verilog module each
(``SeparateModule``): every StripeTraceNpu of a wafer is one module's text, instantiated at each
NPU port, and likewise the TracedIoControllers. Their module names carry every parameter, so two
components that differ in one get two modules (hdl/emit/hierarchy.py)."""

from fractions import Fraction

import pytest

from cocotb_tests.iteration.packet_loading import packet_iteration_format
from hdl.contracts.fabric import fabric_spec
from hdl.contracts.flit import FlitFormat
from hdl.designs.iteration import StripeTraceNpu
from hdl.designs.iteration.traced_io_controller import TracedIoController

SPEC = fabric_spec("fred-a", npus=6, npus_per_l1=2, io_controllers=3, io_rate=Fraction(1, 4))


def _formats():
    packet = packet_iteration_format(SPEC, True, SPEC.io_controllers)
    return FlitFormat(dtype="int32", lanes=1, tag_width=packet.seq_bits + packet.stripe_bits), packet


def _name(component_class, **params) -> str:
    """The module name of a component made only to be named (never elaborated)."""
    component = component_class(**params)
    component._MustUse__silence = True
    return component.module_name


def test_every_parameter_is_in_the_module_names():
    flit, packet = _formats()
    npu = dict(flit=flit, packet=packet, depth=16, stripes=3, nodes=16, programs=128)
    names = {_name(StripeTraceNpu, **npu)}
    for key, other in (("depth", 32), ("stripes", 4), ("nodes", 32), ("programs", 256),
                       ("flit", FlitFormat(dtype="int32", lanes=2, tag_width=flit.tag_width)),
                       ("packet", packet_iteration_format(SPEC, True, 5))):
        names.add(_name(StripeTraceNpu, **dict(npu, **{key: other})))
    assert len(names) == 7
    assert _name(StripeTraceNpu, **npu) == _name(StripeTraceNpu, **npu)
    ctl = dict(flit=flit, packet=packet, depth=16, rate=Fraction(1, 4), programs=64)
    names = {_name(TracedIoController, **ctl)}
    for key, other in (("depth", 32), ("rate", Fraction(16, 375)), ("programs", 128)):
        names.add(_name(TracedIoController, **dict(ctl, **{key: other})))
    assert len(names) == 4


@pytest.mark.full
def test_the_tops_verilog_has_one_module_per_component():
    """(21 s: the small top's Verilog.)"""
    import re
    from cocotb_tests.iteration.packet_io_run import packet_io_verilog
    text = packet_io_verilog(SPEC, 16, 128, 64)
    for prefix, count in (("fred_stripe_trace_npu_", SPEC.npus), ("fred_traced_io_controller_", SPEC.io_controllers)):
        modules = re.findall(rf"^module ({prefix}\w+)\(", text, re.M)
        assert len(modules) == 1, modules
        assert len(re.findall(rf"^  {modules[0]} \w+ \(", text, re.M)) == count
