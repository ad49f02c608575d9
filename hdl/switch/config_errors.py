"""Error codes the configuration memory reports on its ``error`` output (pure Python)."""

from enum import IntEnum

__all__ = ["ConfigError", "ERROR_WIDTH"]

#: Bits of the ``error`` output.
ERROR_WIDTH = 3


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
