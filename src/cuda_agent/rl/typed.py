"""Frozen dataclasses read from a YAML mapping: every key checked against the fields, every value against its type.

Why not a bare dict: a stage file is a few dozen keys edited by hand and on the command line, and a typo or a wrong
type used to be noticed (if at all) deep inside a stage, after a model had loaded. Here a file is refused before
anything runs, and the error names the file, the dotted key, and for an unknown key the closest known one.

Supported field types: ``int``, ``float``, ``str``, ``bool``, ``X | None``, ``Literal[...]``, ``tuple[str, ...]``,
``dict[str, Any]`` (a free-form mapping: raw verl keys, `EnvConfig` fields, a backend spec) and nested dataclasses
(a section). A field whose metadata has ``yaml=False`` is not a key (it is filled by the loader).
"""
from __future__ import annotations

import copy
import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, Union

from cuda_agent.errors import ConfigError

T = TypeVar("T")
NOT_A_KEY = {"yaml": False}
"""Field metadata for a field the loader fills (a ``source`` path), not a YAML key."""


def yaml_keys(cls: type) -> list[str]:
    """The YAML keys of dataclass ``cls``, in declaration order."""
    return [f.name for f in dataclasses.fields(cls) if f.metadata.get("yaml", True)]


def closest(key: str, known: list[str], prefix: str = "") -> str:
    """`` (did you mean 'prefix.x'?)`` for the known key nearest ``key``, or an empty string when none is near."""
    match = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f" (did you mean {prefix + match[0]!r}?)" if match else ""


def from_mapping(cls: type[T], tree: Any, *, where: str, prefix: str = "", **filled: Any) -> T:
    """An instance of dataclass ``cls`` from ``tree``. ``where`` names the file in errors, ``prefix`` the dotted
    section (``"rollout."``), ``filled`` the non-key fields. Raises `ConfigError` for a key that is not a field, a
    missing required key, or a value of the wrong type."""
    if not isinstance(tree, Mapping):
        raise ConfigError(f"{where}: {prefix.rstrip('.') or 'the config'} must be a mapping of keys, got {tree!r}")
    known = yaml_keys(cls)
    for key in tree:
        if key not in known:
            raise ConfigError(f"{where}: unknown key {prefix + str(key)!r}{closest(str(key), known, prefix)}; "
                              f"known: {', '.join(prefix + k for k in known)}")
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = dict(filled)
    for field in dataclasses.fields(cls):
        if not field.metadata.get("yaml", True):
            continue
        name = prefix + field.name
        if field.name in tree:
            values[field.name] = _convert(hints[field.name], tree[field.name], name, where)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}: {name} is required; set it in the file or as {name}=... on the command line")
    return cls(**values)


def _convert(hint: Any, value: Any, name: str, where: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _convert(inner, value, name, where)
    if value is None:
        raise ConfigError(f"{where}: {name} must be set (got null)")
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{where}: {name} must be one of {', '.join(map(str, args))}, got {value!r}")
        return value
    if dataclasses.is_dataclass(hint):
        return from_mapping(hint, value, where=where, prefix=name + ".")
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: {name} must be a mapping, got {value!r}")
        return copy.deepcopy(dict(value))
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: {name} must be a list of strings, got {value!r}")
        return tuple(value)
    return _scalar(hint, value, name, where)


def _scalar(hint: Any, value: Any, name: str, where: str) -> Any:
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif isinstance(value, bool):
        pass  # true/false is never a number or a path
    elif hint is int:
        if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
            return int(value)
    elif hint is float:
        if isinstance(value, (int, float)):
            return float(value)
    elif hint is str:
        if isinstance(value, (str, int, float)):
            return str(value)
    else:
        raise TypeError(f"{name}: field type {hint!r} is not supported by cuda_agent.rl.typed")
    kind = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[hint]
    raise ConfigError(f"{where}: {name} must be {kind}, got {value!r}")
