"""The ``fred`` command line.

Each subcommand is one module in :mod:`fred.commands` with the same name (``-`` written ``_``:
``fabric-sim`` is ``fabric_sim.py``), which defines

* ``HELP``: a one-line summary shown by ``fred --help``;
* ``add_arguments(parser)``: adds its options to an :class:`argparse.ArgumentParser`
  (``--json`` is added here for every subcommand);
* ``run(args) -> int | None``: does the work and prints the result; ``args.json``
  asks for machine-readable output (print with :func:`print_json`).

Errors: any exception escaping ``run`` is printed as one line
``fred <command>: error: <message>`` and the process exits with status 1 (2 for a
usage error). Set ``FRED_TRACEBACK=1`` to see the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

__all__ = ["COMMANDS", "build_parser", "main", "print_json"]

#: Subcommands in the order ``fred --help`` lists them.
COMMANDS = ("verilog", "route", "routability", "characterize", "collective", "cluster", "eval",
            "sweep", "dse", "validate", "replay", "fabric-sim", "fabric-validate",
            "lint", "coverage", "mutation", "formal", "synth", "bench")


def print_json(obj) -> None:
    """Print ``obj`` as indented, key-sorted JSON (the ``--json`` output of every subcommand)."""
    json.dump(obj, sys.stdout, indent=2, sort_keys=True, default=_json_default)
    sys.stdout.write("\n")


def _json_default(obj):
    # numpy scalars and arrays, Paths, dataclass-like objects with to_dict()
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "__fspath__"):
        return os.fspath(obj)
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


def _load(name):
    module = f"fred.commands.{name.replace('-', '_')}"   # fabric-sim -> fabric_sim
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None  # not implemented yet
        raise


def build_parser() -> argparse.ArgumentParser:
    from fred.commands._option_types import OneLineArgumentParser  # one-line argument errors
    parser = OneLineArgumentParser(
        prog="fred",
        description="FRED wafer-scale fabric: Verilog generation, switch routing, "
                    "characterization and system-level evaluation.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        module = _load(name)
        help_text = module.HELP if module else "(not available yet)"
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        cmd.add_argument("--json", action="store_true", help="print machine-readable JSON")
        if module:
            module.add_arguments(cmd)
        cmd.set_defaults(_module=module, _name=name)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    module = args._module
    if module is None:
        print(f"fred {args._name}: error: this subcommand is not implemented yet", file=sys.stderr)
        return 2
    try:
        status = module.run(args)
    except KeyboardInterrupt:
        print(f"fred {args._name}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 -- the CLI promises one line, no traceback
        if os.environ.get("FRED_TRACEBACK"):
            raise
        message = str(exc) or type(exc).__name__
        message = " ".join(message.split())  # one line
        print(f"fred {args._name}: error: {message}", file=sys.stderr)
        return 1
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
