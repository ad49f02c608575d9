"""Reading the model's TOML inputs (platform, cost model, validation and workload files).

One place for what every TOML input does alike: a shipped default under
``sysmodel/configs/``, a missing file and invalid TOML as errors naming the file.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

from hdl.contracts.errors import FredError
from hdl.contracts.text_file import read_text_file

__all__ = ["parse_toml", "read_config_toml"]


def parse_toml(text: str, source: str) -> dict:
    """The TOML document ``text``; invalid TOML is an error naming ``source``."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FredError(f"{source}: invalid TOML ({exc})") from None


def read_config_toml(path: str | Path | None, *, shipped: str, what: str) -> tuple[dict, str]:
    """``(document, source)`` of the TOML file at ``path``, or of the shipped
    ``sysmodel/configs/<shipped>`` when ``path`` is None; a missing file is an error naming
    ``what`` it should have been (e.g. "platform")."""
    if path is None:
        text = resources.files("sysmodel").joinpath("configs", shipped).read_text()
        source = f"sysmodel/configs/{shipped}"
    else:
        path = Path(path)
        if not path.is_file():
            raise FredError(f"{what} file {path} does not exist")
        text, source = read_text_file(path, f"{what} file"), str(path)
    return parse_toml(text, source), source
