"""``to_verilog(..., zero_memory_init=False)``: memories whose initial contents are all zero get
no ``initial`` block, nothing else changes (hdl/emit/verilog.py's docstring); and the builds'
Verilator option zeroes such a memory in the model's constructor, so the model starts in the
state the Verilog with the ``initial`` block gave."""

import re

import pytest
from amaranth import Module
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Component, In, Out

from hdl.contracts.errors import FredError
from hdl.emit.verilog import to_verilog

# one ``initial`` block of memory contents as yosys writes it (a word a line)
_INIT_BLOCK = re.compile(r"  initial begin\n(?:    \S+ ?\[\d+\] = [^\n]*\n)+  end\n")


class _Memories(Component):
    """A written memory with no initial contents (all zero) and a ROM with two non-zero words."""

    def __init__(self):
        super().__init__({"addr": In(3), "we": In(1), "data": In(8), "out": Out(8)})

    def elaborate(self, platform):
        m = Module()
        ram = m.submodules.ram = Memory(shape=8, depth=8, init=[])
        rom = m.submodules.rom = Memory(shape=8, depth=4, init=[5, 0, 7])
        write, read, table = ram.write_port(), ram.read_port(domain="comb"), rom.read_port(domain="comb")
        m.d.comb += [write.addr.eq(self.addr), write.data.eq(self.data), write.en.eq(self.we),
                     read.addr.eq(self.addr), table.addr.eq(self.addr[:2]), self.out.eq(read.data ^ table.data)]
        return m


def test_only_the_all_zero_contents_are_left_out():
    full = to_verilog(_Memories(), name="mems")
    lean = to_verilog(_Memories(), name="mems", zero_memory_init=False)
    blocks = _INIT_BLOCK.findall(full)
    assert len(blocks) == 2                           # Amaranth writes both memories' contents
    zero = [b for b in blocks if "ram[" in b]
    assert len(zero) == 1 and "rom[" in _INIT_BLOCK.findall(lean)[0]
    assert len(_INIT_BLOCK.findall(lean)) == 1        # the ROM's stays, its words as they were
    assert "rom[0] = 8'h05;" in lean and "rom[2] = 8'h07;" in lean
    assert full.replace(zero[0], "") == lean          # and nothing else differs


def test_flat_verilog_refuses_it():
    with pytest.raises(FredError, match="hierarchical"):
        to_verilog(_Memories(), name="mems", flat=True, zero_memory_init=False)


@pytest.mark.verilator
def test_the_builds_verilator_option_zeroes_a_memory_without_contents(tmp_path):
    """The model's constructor sets every word of the memory left without contents to 0
    (``--x-initial`` of eda.toolchain.BUILD_ARGS; ``unique`` would randomise it)."""
    import subprocess
    from eda.toolchain import BUILD_ARGS, setup_verilator
    source = tmp_path / "mems.v"
    source.write_text(to_verilog(_Memories(), name="mems", zero_memory_init=False))
    tool = setup_verilator()
    x_initial = BUILD_ARGS[BUILD_ARGS.index("--x-initial") + 1]
    assert x_initial in ("fast", "0")
    done = subprocess.run([str(tool.executable), "--cc", "-Mdir", str(tmp_path / "obj"), "-Wno-fatal",
                           "--x-initial", x_initial, str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = "".join(p.read_text() for p in (tmp_path / "obj").glob("*Slow.cpp"))
    resets = re.findall(r"for \(int __Vi0 = 0; __Vi0 < (\d+); \+\+__Vi0\) \{\n\s+vlSelf->\S*ram\S*\[__Vi0\] = (\S+);", text)
    assert resets == [("8", "0")], resets
