"""A minimal cocotb testbench for a generated FRED switch (docs/switch.md), to copy.

The switch: Fred_3(4) int32 with 4 configuration slots, top ``ex_fred_switch``
(``fred verilog --unit switch --ports 4 --middle 3 --dtype int32 --name ex_``). Run it with
``make examples`` (``python -m examples.build cocotb``), which builds the switch under Verilator
and passes the compiler's configuration words in the file named by ``EXAMPLE_CONFIG``
(``config_words.json``: ``{"words": {"0": [...], "1": [...]}, "phase_bits": 2, ...}``).

cocotb sees the Verilog port names (``config__valid``, ``i__0__payload``), not Verilator's C++
names. A stream transfers on a rising edge where ``valid`` and ``ready`` are both 1. Payloads:
configuration ``data(32) | last << 32 | slot << 33``; flit ``data(32) | last << 32 | tag << 33``.
"""

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

PORTS = 4
LAST = 1 << 32


def port(dut, name):
    """(valid, ready, payload) handles of stream ``name`` (``"config"``, ``"i__0"``)."""
    return (getattr(dut, f"{name}__valid"), getattr(dut, f"{name}__ready"),
            getattr(dut, f"{name}__payload"))


async def send(dut, name, payload):
    """Offer ``payload`` on stream ``name`` until it transfers (valid raised without waiting for
    ready, as a stream producer must). ``ready`` is read once the cycle has settled (ReadOnly);
    the transfer happens at the next rising edge."""
    valid, ready, data = port(dut, name)
    data.value = payload
    valid.value = 1
    while True:
        await ReadOnly()
        fires = ready.value == 1
        await RisingEdge(dut.clk)
        if fires:
            break
    valid.value = 0


async def load(dut, slot, words):
    for i, word in enumerate(words):
        await send(dut, "config", word | (LAST if i == len(words) - 1 else 0) | slot << 33)
    for _ in range(2):           # the packet is checked the cycle after its last word
        await RisingEdge(dut.clk)
    await ReadOnly()
    assert int(dut.loaded.value) >> slot & 1, f"slot {slot} not loaded, error {int(dut.error.value)}"
    await RisingEdge(dut.clk)    # out of the read-only phase before driving again


async def select(dut, slot):
    await send(dut, "phase", slot)
    await ReadOnly()
    assert int(dut.active_phase.value) == slot and int(dut.active_valid.value) == 1
    await RisingEdge(dut.clk)


async def collect(dut, n, cycles=200):
    """The data of the first flit on output ``n`` (its ready held high)."""
    valid, ready, data = port(dut, f"o__{n}")
    ready.value = 1
    for _ in range(cycles):
        await ReadOnly()
        if valid.value == 1:
            payload = int(data.value)
            await RisingEdge(dut.clk)       # the transfer
            assert payload & LAST, f"output {n}: a one-flit packet must carry last"
            return payload & 0xFFFF_FFFF
        await RisingEdge(dut.clk)
    raise AssertionError(f"output {n}: nothing within {cycles} cycles")


@cocotb.test()
async def reduction_and_multicast(dut):
    config = json.loads(open(os.environ["EXAMPLE_CONFIG"]).read())
    words = {int(slot): w for slot, w in config["words"].items()}
    Clock(dut.clk, 10, unit="ns").start()
    for n in range(PORTS):
        port(dut, f"i__{n}")[0].value = 0
        port(dut, f"o__{n}")[1].value = 0
    dut.config__valid.value = 0
    dut.phase__valid.value = 0
    dut.rst.value = 1
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst.value = 0

    await load(dut, 0, words[0])     # 0,1,2,3>0
    await load(dut, 1, words[1])     # 1>0,2,3

    await select(dut, 0)
    values = [10, 200, 3000, 40000]
    result = cocotb.start_soon(collect(dut, 0))
    senders = [cocotb.start_soon(send(dut, f"i__{n}", v | LAST)) for n, v in enumerate(values)]
    assert await result == sum(values)
    for s in senders:
        await s
    dut._log.info("reduction 0,1,2,3>0: output 0 = %d", sum(values))

    for _ in range(20):               # drained before the next select (the host rule)
        await RisingEdge(dut.clk)
    await select(dut, 1)
    copies = [cocotb.start_soon(collect(dut, n)) for n in (0, 2, 3)]
    await send(dut, "i__1", 77 | LAST)
    assert [await c for c in copies] == [77, 77, 77]
    dut._log.info("multicast 1>0,2,3: outputs 0,2,3 = 77")
