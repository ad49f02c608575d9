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
import ast
import gc
import importlib
import importlib.util
import json
import os
import sys

__all__ = ["COMMANDS", "build_parser", "main", "print_json"]

#: Subcommands in the order ``fred --help`` lists them.
COMMANDS = ("verilog", "route", "routability", "characterize", "collective", "cluster", "eval",
            "sweep", "dse", "validate", "replay", "export-trace", "fabric-sim", "fabric-iteration",
            "fabric-validate", "load-curve",
            "lint", "coverage", "mutation", "formal", "synth", "asic", "bench")


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


def _module_name(name: str) -> str:
    return f"fred.commands.{name.replace('-', '_')}"   # fabric-sim -> fabric_sim


def _load(name):
    module = _module_name(name)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None  # not implemented yet
        raise


def _help_text(name: str) -> str | None:
    """The command module's ``HELP``, read from its source without importing it (importing
    every command module -- numpy, pydantic, the model -- made ``fred --help`` take 0.7 s);
    the module is imported only when its ``HELP`` is not a literal string. None: no such
    module."""
    spec = importlib.util.find_spec(_module_name(name))
    if spec is None:
        return None
    if spec.origin and spec.origin.endswith(".py"):
        with open(spec.origin, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=spec.origin)
        for node in tree.body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "HELP"):
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    break
                if isinstance(value, str):
                    return value
                break
    return _load(name).HELP


def _chosen(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names (its first argument, the top level having no option but
    ``--help``), or None."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def build_parser(command: str | None = None, *, every: bool = True) -> argparse.ArgumentParser:
    """The parser; the options of ``command`` (and, with ``every``, of every subcommand) are
    added by importing its module. ``every=False`` imports only ``command``'s module: the
    other subcommands are listed by their ``HELP`` alone (``fred --help`` stays fast)."""
    from fred.commands._option_types import OneLineArgumentParser  # one-line argument errors
    parser = OneLineArgumentParser(
        prog="fred",
        description="FRED wafer-scale fabric: Verilog generation, switch routing, "
                    "characterization and system-level evaluation.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        module = _load(name) if every or name == command else None
        help_text = module.HELP if module else _help_text(name)
        help_text = help_text or "(not available yet)"
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        cmd.add_argument("--json", action="store_true", help="print machine-readable JSON")
        if module:
            module.add_arguments(cmd)
        cmd.set_defaults(_module=module, _name=name)
    return parser


#: Container allocations between two young-generation garbage collections (Python's default:
#: 700). The system model keeps ~10^5 long-lived cache entries and allocates ~10^5 short-lived
#: objects per evaluation; at 700, `fred dse` on one workload ran ~1,200 collections taking
#: 4.4 s of its 26 s of CPU, at 10,000 about 160 taking 1.9 s (docs/sysmodel.md, Speed). When
#: collections run changes, never what is computed; worker processes inherit it (fork).
YOUNG_COLLECTION_THRESHOLD = 10_000


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; its exit status. ``argv=None``: the process's own command line (the
    ``fred`` script, ``python -m fred``), which exits with this status -- so a command may leave
    the garbage collector's policy in place at its end (``args._process_exits``,
    :mod:`fred.gc_policy`); a list: a call inside a longer-lived process (the tests), after which
    every command leaves the collector as it found it."""
    process_exits = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
    parser = build_parser(_chosen(argv), every=False)
    args = parser.parse_args(argv)
    args._process_exits = process_exits
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
