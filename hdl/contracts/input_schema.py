"""Input files validated by pydantic: the shared base model, field types and error message.

The five input readers (platform, workload, validation cases, cost, characterization) each
describe their document as :class:`InputModel` subclasses and validate it with
:func:`validate_input`; a :class:`pydantic.ValidationError` becomes one :class:`FredError`
line naming the file, the table and the key (:func:`input_error_message`), e.g.
``configs/x.toml: [network] link_bandwidth_gbps: expected a number > 0, got 'fast'``.

Models are strict: a bool is never a number, an int field takes no float, a float field takes
an int (as a float), nothing is coerced from a string.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hdl.contracts.errors import FredError

__all__ = ["InputModel", "validate_input", "input_error_message", "Number", "PositiveNumber",
           "NonNegativeNumber", "UnitFraction", "PositiveInt", "NonNegativeInt"]


class InputModel(BaseModel):
    """Base of every input-file model: unknown keys refused, values immutable, no coercion."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


#: A finite number (int or float, never a bool), read as a float.
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
#: A finite number > 0.
PositiveNumber = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]
#: A finite number >= 0.
NonNegativeNumber = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
#: A finite number in (0, 1]: an efficiency, a utilization, a share of a peak.
UnitFraction = Annotated[float, Field(strict=True, gt=0, le=1, allow_inf_nan=False)]
#: An integer >= 1 (never a bool or a float).
PositiveInt = Annotated[int, Field(strict=True, ge=1)]
#: An integer >= 0.
NonNegativeInt = Annotated[int, Field(strict=True, ge=0)]


def validate_input(model: type[BaseModel], data: Any, source: str, *, prefix: tuple = (),
                   style: str = "toml"):
    """``model`` validated from the decoded document ``data`` of file ``source``; a
    validation error is a :class:`FredError` from :func:`input_error_message` (``prefix``: the
    location of ``data`` in its file, when it is a part of it)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise FredError(input_error_message(exc, source, model=model, data=data, prefix=prefix,
                                            style=style)) from None


def input_error_message(exc: ValidationError, source: str, *, model: type[BaseModel] | None = None,
                        data: Any = None, prefix: tuple = (), style: str = "toml") -> str:
    """One line for the first error of ``exc`` (an unknown key, then a missing one, first): the file ``source``, where in it (``style``
    ``toml``: ``[table] key``; ``json``: ``a.b.key``) and what was expected, got what.

    ``model`` (the validated class) lets the message say what the key expects (type and
    bounds) and which keys a table allows; ``data`` (the document) names array entries by
    their ``name``; ``prefix``: the location of ``data`` inside the file."""
    errors = exc.errors(include_url=False)
    # an unknown key first (a misspelt key also makes the key it meant "missing"), then a
    # missing one, then the values
    error = next((e for e in errors if e["type"] == "extra_forbidden"),
                 next((e for e in errors if e["type"] == "missing"), errors[0]))
    loc = tuple(error["loc"])
    kind = error["type"]
    where = _where(prefix, loc, data, style)
    if kind in ("value_error", "assertion_error") and loc + prefix and style == "toml":
        where = f"[{_where(prefix, loc, data, 'json')}]"    # a table's own check: the table
    annotation, metadata, parent = _field_at(model, loc) if model is not None else (None, (), None)
    if kind == "missing":
        reason = "missing (required)"
    elif kind == "extra_forbidden":
        allowed = sorted(parent.model_fields) if parent is not None else []
        what = "table or key" if isinstance(error["input"], dict) else "key"
        reason = f"unknown {what}" + (f" (expected one of: {', '.join(allowed)})" if allowed else "")
    elif kind in ("value_error", "assertion_error"):
        reason = str(error.get("ctx", {}).get("error", error["msg"]))
    elif kind in ("too_short", "too_long"):
        ctx = error.get("ctx", {})
        bound = ctx.get("min_length") if kind == "too_short" else ctx.get("max_length")
        reason = (f"expected {'at least' if kind == 'too_short' else 'at most'} {bound} "
                  f"{'entry' if bound == 1 else 'entries'}, got {ctx.get('actual_length')}")
    else:
        expected = _describe(annotation, metadata) if annotation is not None else None
        reason = f"expected {expected or _fallback(error)}, got {_shown(error['input'])}"
    if style == "json":
        reason = reason.replace("a table", "an object").replace("an empty table", "an empty object")
    return f"{source}: {where}: {reason}" if where else f"{source}: {reason}"


def _shown(value) -> str:
    if isinstance(value, dict):
        return "a table" if value else "an empty table"
    if isinstance(value, list):
        return "an array"
    if value is True or value is False:      # as the file spells it
        return "true" if value else "false"
    return repr(value)


def _where(prefix: tuple, loc: tuple, data: Any, style: str) -> str:
    """``[a.b[0] (name)] key`` (``toml``) or ``a.b[0].key`` (``json``) of location ``loc``."""
    parts, node = [], data
    for i, item in enumerate(loc):
        child = None
        try:
            child = node[item] if node is not None else None
        except (KeyError, IndexError, TypeError):
            child = None
        if item == "[key]":       # the key itself is wrong: the location is the key's
            continue
        if isinstance(item, int):
            label = f"[{item}]"
            if isinstance(child, dict) and isinstance(child.get("name"), str):
                label += f" ({child['name']})"
            if parts:
                parts[-1] += label
            else:
                parts.append(label)
        else:
            parts.append(str(item))
        node = child
    parts = [str(p) for p in prefix] + parts
    if not parts:
        return ""
    if style == "json" or len(parts) == 1:
        return ".".join(parts)
    return f"[{'.'.join(parts[:-1])}] {parts[-1]}"


def _fallback(error: dict) -> str:
    """What pydantic's own message says was expected (``Input should be ...``)."""
    msg = error["msg"]
    return msg.removeprefix("Input should be ").removeprefix("Value should be ")


def _unwrap(annotation) -> tuple[Any, list]:
    """(the bare type, its constraint metadata) of a possibly ``Annotated`` / optional type."""
    metadata = []
    while True:
        if typing.get_origin(annotation) is Annotated:
            args = typing.get_args(annotation)
            annotation = args[0]
            for m in args[1:]:
                metadata += list(getattr(m, "metadata", [])) if hasattr(m, "metadata") else [m]
            continue
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) == 1:
                annotation = args[0]
                continue
        return annotation, metadata


def _field_at(model, loc: tuple):
    """(annotation, constraint metadata, the model holding the last key) at ``loc``."""
    annotation, metadata, parent = model, [], None
    for i, item in enumerate(loc):
        bare, _ = _unwrap(annotation)
        origin = typing.get_origin(bare)
        if item == "[key]":
            continue
        if origin is dict and loc[i + 1:i + 2] == ("[key]",):   # the dict's key is wrong
            annotation, metadata = typing.get_args(bare)[0], []
            continue
        if isinstance(bare, type) and issubclass(bare, BaseModel):
            if item not in bare.model_fields:
                return None, [], bare
            parent = bare
            info = bare.model_fields[item]
            annotation, metadata = info.annotation, list(info.metadata)
        elif origin is dict and isinstance(item, str):
            annotation, metadata = typing.get_args(bare)[1], []
        elif origin in (list, tuple) and isinstance(item, int):
            args = [a for a in typing.get_args(bare) if a is not Ellipsis]
            annotation, metadata = (args[item] if origin is tuple and len(args) > 1 else args[0]), []
        else:
            return None, [], parent
    bare, more = _unwrap(annotation)
    return bare, metadata + more, parent


def _describe(annotation, metadata) -> str | None:
    """``a number > 0``, ``an integer >= 1``, ``true or false``, ``one of 'a', 'b'``..."""
    if typing.get_origin(annotation) is Literal:
        return "one of " + ", ".join(repr(v) for v in typing.get_args(annotation))
    if annotation is bool:
        return "true or false"
    if annotation is str:
        return "a string"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel) or annotation is dict \
            or typing.get_origin(annotation) is dict:
        return "a table"
    if annotation in (list, tuple) or typing.get_origin(annotation) in (list, tuple):
        return "an array"
    if annotation not in (int, float):
        return None
    text = "an integer" if annotation is int else "a number"
    bounds = []
    for m in metadata:
        for attr, op in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            value = getattr(m, attr, None)   # annotated_types.Gt(gt=0), Ge, Lt, Le
            if type(m).__name__ == attr.capitalize() and value is not None:
                bounds.append((op, value))
    low = [b for b in bounds if b[0] in (">", ">=")]
    high = [b for b in bounds if b[0] in ("<", "<=")]
    if low and high:
        return (f"{text} in {'(' if low[0][0] == '>' else '['}{low[0][1]:g}, "
                f"{high[0][1]:g}{')' if high[0][0] == '<' else ']'}")
    if bounds:
        return f"{text} {bounds[0][0]} {bounds[0][1]:g}"
    return text
