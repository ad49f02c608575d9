"""The NPU engine's contract: its register map and the data it sends and checks.

The RTL fabric's NPU engines (:class:`hdl.designs.fabric.npu_engine.NpuEngine`) are loaded with
programs the compiler computes (:mod:`hdl.compiler.fabric_program`) and send data that a golden
model predicts (:mod:`hdl.compiler.fabric_golden`). What all three must agree on lives here:
the engine's registers (stage table and own registers, their addresses), the deterministic data
each NPU sends (:func:`mix`, :func:`rank_weights`, :func:`flit_value`, :func:`fp16_value`), the
hash of what it receives (:func:`fold_hash`) and its buffer size. Pure Python.
"""

from __future__ import annotations

__all__ = ["ENGINE_STAGES", "STAGE_REGS", "STAGE_ROW", "ENGINE_GLOBAL_REGS", "ENGINE_REGS", "DTYPES_RUN",
           "HASH_MULTIPLIER", "MIX_CONSTANTS", "NPU_BUFFER", "stage_reg", "engine_writes", "mix",
           "rank_weights", "flit_value", "fp16_value", "fold_hash"]

#: Stages an NPU engine runs one after another (the hierarchical all-reduce's three).
ENGINE_STAGES = 3
#: Registers of one engine stage (:class:`hdl.designs.fabric.npu_engine.NpuEngine`).
STAGE_REGS = ("send_count", "recv_count", "ws", "hs", "wr", "hr", "own_only", "add_until",
              "fwd_count", "check_from", "chunk", "last_base", "out_base", "in_base", "org")
#: Register addresses per stage (a row of the engine's stage table: STAGE_REGS and padding).
STAGE_ROW = 16
#: The engine's own registers (addresses 48 ..: row 3 of the address space).
ENGINE_GLOBAL_REGS = ("backpressure", "seed", "stages", "send_total")
#: Engine program registers, in register-address order: stage s's register f at
#: 16 s + f (padding names ``s<s>_pad<f>``), then the engine's own at 48 ...
ENGINE_REGS = tuple(
    stage_name for s in range(ENGINE_STAGES)
    for stage_name in ([f"s{s}_{name}" for name in STAGE_REGS]
                       + [f"s{s}_pad{f}" for f in range(len(STAGE_REGS), STAGE_ROW)])
) + ENGINE_GLOBAL_REGS
assert ENGINE_STAGES <= 3 and len(STAGE_REGS) <= STAGE_ROW   # the engine decodes row 3 as its own
#: Data types the fabric's engines run: int32 checked flit by flit, fp16 by a hash of every
#: received flit against the golden model (:mod:`hdl.compiler.fabric_golden`).
DTYPES_RUN = ("int32", "fp16")
#: Multiplier of the engines' received-data hash (FNV-1a's 32-bit prime).
HASH_MULTIPLIER = 0x01000193
#: Constants of :func:`mix` (odd multipliers of a 32-bit finaliser).
MIX_CONSTANTS = (0x9E3779B1, 0x85EBCA77, 0x2C1B3C6D)
_MASK = 0xFFFFFFFF
#: Flits each NPU engine can hold between receiving a flit and forwarding it
#: (:class:`hdl.designs.fabric.npu_engine.NpuEngine`): a ring's chunk must fit, since every NPU sends
#: its own chunk before it forwards.
NPU_BUFFER = 4096


def stage_reg(stage: int, name: str) -> str:
    """The :data:`ENGINE_REGS` name of register ``name`` of engine stage ``stage``."""
    return f"s{stage}_{name}"


def engine_writes(engine: dict) -> list[tuple[int, int]]:
    """(register address, value) writes that load ``engine`` (a :attr:`FabricProgram.engines`
    entry) into an NPU engine; stages it does not use are loaded empty."""
    values = {"backpressure": engine["backpressure"], "seed": engine["seed"],
              "stages": len(engine["stages"]),
              "send_total": sum(st["send_count"] for st in engine["stages"])}
    for st, stage in enumerate(engine["stages"]):
        values.update({stage_reg(st, name): stage[name] for name in STAGE_REGS})
    return [(i, values.get(name, _MASK if name.endswith("_chunk") else 0) & _MASK)
            for i, name in enumerate(ENGINE_REGS) if "_pad" not in name]


def mix(index: int, lane: int) -> int:
    """The 32-bit non-linear function of a flit index and lane (the RTL's ``_mix``)."""
    c1, c2, c3 = MIX_CONSTANTS
    x = (index * c1 + ((lane + 1) * c2 & _MASK)) & _MASK
    x ^= x >> 15
    x = (x * c3) & _MASK
    return x ^ (x >> 12)


def rank_weights(rank: int, seed: int = 0) -> tuple[int, int]:
    """``(w, h)`` of the data NPU ``rank`` sends: flit k lane l = w * mix(k, l) + h mod 2^32."""
    w = mix(0x10000 + rank, seed) | 1
    h = mix(0x20000 + rank, seed + 7)
    return w, h


def flit_value(weights: tuple[int, int], index: int, lane: int) -> int:
    w, h = weights
    return (w * mix(index, lane) + h) & _MASK


def fp16_value(weights: tuple[int, int], index: int, lane: int) -> int:
    """fp16 bit pattern NPU data of ``weights`` carries at ``index``, ``lane`` (the engine's
    ``_fp16`` of :func:`flit_value`): sign bit 31, exponent 13 + bits 26..27, fraction bits
    16..25 of the int32 word -- magnitudes 1/4 .. 8, so sums of 20 stay finite."""
    x = flit_value(weights, index, lane)
    return ((x >> 31) << 15) | ((((x >> 26) & 3) + 13) << 10) | ((x >> 16) & 0x3FF)


def fold_hash(h: int, word: int) -> int:
    """The engines' received-data hash step: ``(h ^ word) * HASH_MULTIPLIER`` mod 2^32."""
    return ((h ^ word) * HASH_MULTIPLIER) & _MASK
