"""Reading a text file a user named (a platform, workload, characterization, case file, Verilog):
a missing, unreadable, folder or binary file is one :class:`FredError` line that names the file,
never a bare ``'utf-8' codec can't decode byte ...``."""

from __future__ import annotations

from pathlib import Path

from hdl.contracts.errors import FredError

__all__ = ["read_text_file"]


def read_text_file(path, what: str = "file") -> str:
    """The UTF-8 text of ``path``; ``what`` names the file's role in the error
    (``"platform file"``)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FredError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise FredError(f"{what} {path} is a folder, not a file") from None
    except OSError as exc:
        raise FredError(f"{what} {path}: cannot read it ({exc.strerror or exc})") from None
    if b"\0" in data[:4096]:
        raise FredError(f"{what} {path} is a binary file; expected text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FredError(f"{what} {path} is not UTF-8 text (byte {exc.start} is "
                        f"0x{data[exc.start]:02x})") from None
