"""The switch's configuration port, as a contract: the word layout, the error codes, the timing.

The configuration memory of ``fred_switch`` (``hdl.designs.switch.config_memory.ConfigMemory``) takes
*packets* of configuration words on its ``config`` stream and phase selects on its ``phase``
stream (protocol: ``docs/switch.md``). What a host, a bench or the system model needs to know
about that port lives here, in pure Python: :func:`config_word_layout` (the payload of one
word), :class:`ConfigError` (the ``error`` output), :func:`config_words` and
:func:`select_cycles`.
"""

from __future__ import annotations

from enum import IntEnum

from hdl.contracts.bitfields import BitLayout
from hdl.contracts.encoding import DEFAULT_WORD_WIDTH, config_bits
from hdl.contracts.errors import FredError

__all__ = ["ConfigError", "ERROR_WIDTH", "MAX_PHASES", "check_port_parameters", "config_word_layout",
           "phase_index_width", "config_words", "select_cycles"]

#: Bits of the ``error`` output.
ERROR_WIDTH = 3
#: Most configuration slots a switch may store.
MAX_PHASES = 256


class ConfigError(IntEnum):
    """Value of ``error``: the most recent failure, cleared by the next successful operation
    (a configuration packet that loads, or a phase select that takes effect)."""

    NONE = 0
    #: A configuration packet ended (``last``) after fewer or more words than one phase has.
    WORD_COUNT = 1
    #: A packet completed with the right length but holds an illegal or non-canonical mode
    #: (or non-zero padding bits); the slot stays unloaded.
    ILLEGAL_MODE = 2
    #: A packet word or a phase select named a slot >= ``phases``, or a packet changed its
    #: phase field between words.
    BAD_PHASE = 3
    #: A phase select named a slot that holds no complete, legal configuration.
    NOT_LOADED = 4


def check_port_parameters(*, phases, word_width) -> None:
    """Raise FredError unless 1 <= phases <= 256 and 8 <= word_width <= 256."""
    if not isinstance(phases, int) or isinstance(phases, bool) or not 1 <= phases <= MAX_PHASES:
        raise FredError(f"phases must be an integer in 1..{MAX_PHASES}, got {phases!r}")
    if not isinstance(word_width, int) or isinstance(word_width, bool) or not 8 <= word_width <= 256:
        raise FredError(f"word_width must be an integer in 8..256, got {word_width!r}")


def phase_index_width(phases: int) -> int:
    """Bits of a slot index for ``phases`` slots (at least 1)."""
    return max(1, (phases - 1).bit_length())


def config_word_layout(phases: int, word_width: int = DEFAULT_WORD_WIDTH) -> BitLayout:
    """Payload of the configuration write stream: ``data(word_width) last(1) phase(...)``."""
    return BitLayout("configuration word", [("data", word_width), ("last", 1),
                                            ("phase", phase_index_width(phases))])


def config_words(ports: int, middle: int, word_width: int = DEFAULT_WORD_WIDTH) -> int:
    """Words of ``word_width`` bits one phase takes (the last one zero-padded)."""
    return -(-config_bits(ports, middle) // word_width)


def select_cycles(ports: int, middle: int, word_width: int = DEFAULT_WORD_WIDTH) -> int:
    """Cycles a phase select takes once the switch is drained, including the cycle ``ready`` is
    high: one to start the copy and N reads (the read port has one cycle of latency, so the last
    word arrives one cycle after it was issued): N + 2."""
    return config_words(ports, middle, word_width) + 2
