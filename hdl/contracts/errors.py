"""Errors for bad input.

Library code raises :class:`FredError` (or plain :class:`ValueError`) with a
message that names what is wrong; the ``fred`` command line prints that message
as one line and exits non-zero, without a traceback.
"""


class FredError(ValueError):
    """Bad input or an unusable environment, described for a human in one line."""


class ToolchainError(FredError):
    """A required external tool (Verilator) is missing, too old or unusable."""
