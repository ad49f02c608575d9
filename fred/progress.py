"""Progress bars for long commands (docs/sysmodel.md, Speed): counts and time remaining, on stderr.

:func:`progress_bar` returns a tqdm bar (``done/total``, rate, elapsed and remaining time) when
it is wanted -- stdout and stderr are terminals and the command was not asked for ``--json``
-- and a
silent stand-in otherwise, so callers never test for it. ``FRED_PROGRESS=1`` forces the bar
(e.g. in a CI log), ``FRED_PROGRESS=0`` silences it.
"""

from __future__ import annotations

import os
import sys

__all__ = ["progress_bar", "wanted", "Silent"]


class Silent:
    """A progress bar that shows nothing (same methods as the tqdm bar used)."""

    def __init__(self, total: int = 0, desc: str = ""):
        self.total, self.n, self.desc = total, 0, desc

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix_str(self, text: str) -> None:
        pass

    def write(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def wanted(json_output: bool = False, stream=None) -> bool:
    """Whether to draw a bar: not with ``--json``, and only when stdout (or ``stream``) and
    stderr are terminals, unless ``FRED_PROGRESS`` says otherwise."""
    forced = os.environ.get("FRED_PROGRESS")
    if forced is not None:
        return forced not in ("", "0")
    if json_output:
        return False

    def tty(s) -> bool:
        return bool(getattr(s, "isatty", lambda: False)())
    return tty(stream or sys.stdout) and tty(sys.stderr)


def progress_bar(total: int, desc: str, *, json_output: bool = False, unit: str = "point"):
    """A bar over ``total`` items (see the module docstring)."""
    if not wanted(json_output):
        return Silent(total, desc)
    import shutil
    from tqdm import tqdm
    # a terminal that reports no size (0 x 0, e.g. a bare pty) would get an empty bar (tqdm
    # hides bars below the last row): fall back to 100 x 20
    size = shutil.get_terminal_size((100, 20))
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, ncols=size.columns or 100,
                nrows=size.lines or 20,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                           "[{elapsed}<{remaining}, {rate_fmt}]{postfix}")
