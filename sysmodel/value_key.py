"""Hashable keys from dataclass values, for the model's caches (issue 16).

The caches of networks, collective results and task graphs are keyed by what they depend on:
a platform's fields (minus those known not to matter). Fields may hold dicts (the switch-tree
variants), lists or other dataclasses; :func:`value_key` turns them into nested tuples, so any
field -- including one added later -- takes part in the key instead of breaking it.
"""

from __future__ import annotations

import dataclasses

__all__ = ["value_key", "hashable"]


def hashable(value):
    """``value`` as something hashable that compares equal exactly when the values do."""
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), hashable(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(hashable(v) for v in value))
    try:
        hash(value)
        return value
    except TypeError:
        if dataclasses.is_dataclass(value):
            return (type(value).__name__, value_key(value))
        return ("repr", repr(value))


def value_key(obj, exclude=frozenset()) -> tuple:
    """((field name, hashable value), ...) of a dataclass instance, without ``exclude``."""
    return tuple((f.name, hashable(getattr(obj, f.name))) for f in dataclasses.fields(obj)
                 if f.name not in exclude)
