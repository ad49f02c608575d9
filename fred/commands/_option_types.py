"""argparse option types the subcommands share, and the checks every command runs before any work.

A bad value is argparse's one-line usage error naming the option
(``fred route: error: argument --ports: expected an integer in 2..1024, got '100000'``).

Every numeric option of every subcommand has a documented range (its ``--help`` text says it).
The ranges are what the tool can do on one 2-core machine in about a minute or less; the upper
bounds and the figures behind them are in ``docs/cli.md`` ("Input ranges"). The range objects
here are the one place that writes those checks:

* :func:`int_in` / :func:`float_in`: one number (finite, within ``lo..hi``);
* :func:`ints_in`: a comma list of such integers (``"4,8,16"``);
* :func:`output_path` (before the work): the folder of an output file can be created and written;
* input files that are missing, folders, unreadable or binary: the readers use
  :func:`hdl.contracts.text_file.read_text_file`, whose error names the file.
"""

from __future__ import annotations

import argparse
import math

__all__ = ["comma_ints", "int_in", "float_in", "ints_in", "floats_in", "RANGES", "output_path",
           "OneLineArgumentParser",
           "VERILOG_PARAM_RANGES", "verilog_identifier"]


def comma_ints(text: str) -> tuple[int, ...]:
    """``"4,8,16"`` -> ``(4, 8, 16)`` (empty items skipped, so ``""`` is ``()``)."""
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _span(lo, hi) -> str:
    return f"{lo:g}..{hi:g}" if isinstance(lo, float) or isinstance(hi, float) else f"{lo}..{hi}"


class int_in:  # noqa: N801 -- used like a type: ``type=int_in(2, 1024)``
    """An argparse type: an integer in ``lo..hi`` (both included)."""

    def __init__(self, lo: int, hi: int):
        self.lo, self.hi = lo, hi
        self.__name__ = f"integer in {lo}..{hi}"

    def __call__(self, text) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer in {self.lo}..{self.hi}, "
                                             f"got {text!r}") from None
        if not self.lo <= value <= self.hi:
            raise argparse.ArgumentTypeError(f"expected an integer in {self.lo}..{self.hi}, got {value}")
        return value

    @property
    def span(self) -> str:
        return _span(self.lo, self.hi)


class float_in:  # noqa: N801
    """An argparse type: a finite number in ``lo..hi``; ``open_lo`` excludes ``lo`` (a positive
    quantity: ``float_in(0, 1e15, open_lo=True)``)."""

    def __init__(self, lo: float, hi: float, *, open_lo: bool = False, open_hi: bool = False):
        self.lo, self.hi, self.open_lo, self.open_hi = float(lo), float(hi), open_lo, open_hi
        self.__name__ = f"number in {self.span}"

    @property
    def span(self) -> str:
        left = "(" if self.open_lo else "["
        right = ")" if self.open_hi else "]"
        return f"{left}{self.lo:g}, {self.hi:g}{right}"

    def __call__(self, text) -> float:
        try:
            value = float(str(text).strip())
        except ValueError:
            value = math.nan
        ok = (math.isfinite(value)
              and (value > self.lo if self.open_lo else value >= self.lo)
              and (value < self.hi if self.open_hi else value <= self.hi))
        if not ok:
            raise argparse.ArgumentTypeError(f"expected a finite number in {self.span}, got {text!r}")
        return value


class ints_in:  # noqa: N801
    """An argparse type: a comma list of integers, each in ``lo..hi``, at most ``max_items``
    (``allow_empty``: ``''`` is ``()``)."""

    def __init__(self, lo: int, hi: int, *, max_items: int = 64, allow_empty: bool = False):
        self.item, self.max_items, self.allow_empty = int_in(lo, hi), max_items, allow_empty
        self.span = f"each {lo}..{hi}"
        self.__name__ = f"comma list of integers in {lo}..{hi}"

    def __call__(self, text) -> tuple[int, ...]:
        items = [x for x in str(text).split(",") if x.strip()]
        if not items and not self.allow_empty:
            raise argparse.ArgumentTypeError(f"expected a {self.__name__}, got {text!r}")
        if len(items) > self.max_items:
            raise argparse.ArgumentTypeError(f"at most {self.max_items} values, got {len(items)}")
        try:
            return tuple(self.item(x) for x in items)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{exc} (in {text!r})") from None


class floats_in(ints_in):  # noqa: N801
    """An argparse type: a comma list of finite numbers, each in :class:`float_in`'s range."""

    def __init__(self, lo: float, hi: float, *, open_lo: bool = False, max_items: int = 64):
        super().__init__(0, 0, max_items=max_items)
        self.item = float_in(lo, hi, open_lo=open_lo)
        self.span = f"each {self.item.span}"
        self.__name__ = f"comma list of numbers in {self.item.span}"


class grid_in:  # noqa: N801
    """An argparse type: ``ROWSxCOLS`` (``3x3``), each an integer in ``lo..hi``."""

    def __init__(self, lo: int, hi: int):
        self.item = int_in(lo, hi)
        self.span = f"ROWSxCOLS, each {lo}..{hi}"
        self.__name__ = f"ROWSxCOLS with each in {lo}..{hi}"

    def __call__(self, text) -> tuple[int, int]:
        parts = str(text).lower().split("x")
        if len(parts) != 2:
            raise argparse.ArgumentTypeError(f"expected ROWSxCOLS (e.g. 3x3), got {text!r}")
        try:
            return self.item(parts[0]), self.item(parts[1])
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{exc} (in {text!r})") from None


#: The ranges the subcommands share (one definition each; docs/cli.md "Input ranges").
RANGES = {
    # Fred_m(P) ports by what the command does with them (measured on a busy 2-core machine:
    # route Fred_3(1024) 1.9 s; routability Fred_3(256) 10 samples 2 s (Fred_3(1000): 41 s, 1.6 GB
    # for 3); verilog Fred_3(64) 6 s)
    "route_ports": int_in(2, 1024),
    "routability_ports": int_in(2, 256),
    "verilog_ports": int_in(2, 128),
    "middle": int_in(2, 16),
    "samples": int_in(1, 100_000),          # Fred_3(12): 20 000 in 6.5 s
    "seed": int_in(0, 2**32 - 1),
    "budget": int_in(1, 10_000_000),
    "npus": int_in(1, 4096),
    "jobs": int_in(0, 256),                 # 0: one per CPU
    "samples_per_dp": int_in(1, 10_000),
    "top": int_in(1, 10_000),
    "compute_scale": float_in(0, 1e6, open_lo=True),
    "trace_scale": float_in(1, 1e9),           # export-trace: bytes and compute times / K
    "bytes": float_in(0, 1e15, open_lo=True),          # a collective of at most 1 PB
    "probability": float_in(0, 1, open_hi=True),       # backpressure: a cycle's stall probability
    "flits": int_in(1, 1_000_000),          # per NPU; the RTL fabric runs ~100-280 k cycles/s
    "cycles": int_in(0, 1_000_000),
    "cycle_ns": float_in(0, 1e6, open_lo=True),
    "word_width": int_in(8, 1024),
    "count": int_in(1, 100_000),
    "repeat": int_in(1, 100_000),
    "timeout_s": float_in(0, 7 * 24 * 3600, open_lo=True),
    "timeout_whole_s": int_in(1, 7 * 24 * 3600),
    "freq_mhz": float_in(0, 2000, open_lo=True),
    "length": int_in(2, 100_000),           # flits per packet (characterize needs two at least)
    "port": int_in(0, 4095),
    "watchdog": int_in(1, 100_000_000),
    "flit_list": ints_in(1, 1_000_000),
    "rank": int_in(0, 10_000_000),          # an NPU of a cluster platform (10 000s of NPUs)
    "chunks": int_in(1, 4096),
    "uncertainty_samples": int_in(0, 200),  # fred eval: 6 (the default) add ~15 s
    # fred load-curve: the packet switch in Amaranth's simulator, ~200 cycles/s at P = 8
    "load_ports": int_in(2, 16),
    # the mesh of fred load-curve --mesh, in Amaranth's simulator (3 x 3: ~4 s per load point)
    "load_mesh": grid_in(2, 4),
    "load_rates": floats_in(0, 1, open_lo=True, max_items=32),
    "load_cycles": int_in(10, 100_000),
    "packet_flits": int_in(2, 64),
    # fred dse --optimize bandwidth: GBps or $ per NPU; grid steps of the budget shares (a
    # 3-dimension grid of 1000 steps is ~500 000 model points: the bound keeps it finite)
    "network_budget": float_in(0, 1e9, open_lo=True),
    "grid": int_in(2, 1000),
    # characterize and bench verilog build Verilator models: P up to Fred_3(64)
    "characterize_ports": ints_in(2, 64),
    "characterize_chiplets": ints_in(2, 64, allow_empty=True),
    "middles": ints_in(2, 16),
    "seeds": ints_in(0, 2**32 - 1),
    "verilog_port_list": ints_in(2, 128),
    "verilog_port_list_or_none": ints_in(2, 128, allow_empty=True),
}

#: ``fred verilog``'s integer design options by name (hdl/designs/registry.py says what each is;
#: the component checks its own constraints, e.g. m >= 2, within these).
VERILOG_PARAM_RANGES = {
    "ports": RANGES["verilog_ports"], "middle": RANGES["middle"], "width": int_in(1, 4096),
    "lanes": int_in(1, 64), "phases": int_in(1, 256), "tag_width": int_in(1, 64),
    "word_width": RANGES["word_width"], "depth": int_in(1, 65536), "ctrl_depth": int_in(0, 65536),
    "packet_flits": int_in(1, 65536), "seq_bits": int_in(1, 32), "flow_bits": int_in(1, 32),
    "rows": int_in(2, 14), "cols": int_in(2, 14), "eject_depth": int_in(1, 1 << 20),
    "engine_buffer": int_in(1, 1 << 20),
}


def verilog_identifier(text: str) -> str:
    """An argparse type: a Verilog identifier (``fred verilog --name``)."""
    import re
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", text):
        raise argparse.ArgumentTypeError(f"expected a Verilog identifier (letters, digits, _; not "
                                         f"starting with a digit; at most 64), got {text!r}")
    return text


def output_path(path, option: str, *, folder: bool = False) -> None:
    """Raise a one-line error naming ``option`` if output ``path`` (a file, or a ``folder``)
    cannot be written, so a command finds out before its work and not after
    (:func:`studies.report.check_writable`). ``None`` and ``-`` (stdout) pass."""
    if path is None or str(path) == "-":
        return
    from hdl.contracts.errors import FredError
    from studies.report import check_writable
    try:
        check_writable(path, folder=folder)
    except FredError as exc:
        raise FredError(f"{option}: {exc}") from None


class RangeHelpFormatter(argparse.HelpFormatter):
    """``--help`` shows each ranged option's range: ``P, number of switch ports [2..1024]``."""

    def _get_help_string(self, action):
        text = action.help or ""
        span = getattr(action.type, "span", None)
        if span and span not in text:
            text += f" [{span}]"
        return text


class OneLineArgumentParser(argparse.ArgumentParser):
    """An argument error is one line, ``fred route: error: argument --ports: ...``, plus where the
    usage is (``--help``) instead of the whole usage block; ``--help`` shows the ranges."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", RangeHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        message = " ".join(str(message).split())
        self.exit(2, f"{self.prog}: error: {message} (usage: {self.prog} --help)\n")
