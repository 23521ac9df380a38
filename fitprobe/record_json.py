"""Records to JSON by their declared field types, written exactly as pydantic writes them.

The `--json` contract is a tree of keyword-only dataclasses (`fitprobe.schema` and the estimator's
records). pydantic could validate and dump it, but importing pydantic costs more than sizing the plan;
this writer walks the same tree with pydantic's lax-mode rules (an int in a float field is written as a
float, an integral float in an int field as an int, inf and nan as null), rejects a value that does not
match its declared type, and formats numbers as pydantic-core does. tests/gate/test_contract_json.py
holds its output to pydantic's own, byte for byte, across many plans.
"""
from __future__ import annotations

import builtins
import dataclasses
import math
import types
import typing
from functools import lru_cache
from json.encoder import encode_basestring
from typing import Any

from fitprobe.estimator.fields import annotation


class ContractError(ValueError):
    """A value that does not match the type its record declares."""


def record_data(value, only: typing.Iterable[str] | None = None, *, path: str = "$") -> dict:
    """The JSON-ready dict of a record (all fields, or those named in `only` that the record has)."""
    types_ = _field_types(type(value))
    names = types_ if only is None else [n for n in only if n in types_]
    return {name: _convert(getattr(value, name), types_[name], f"{path}.{name}") for name in names}


def without_none(data):
    """`data` with every null-valued key left out, at any depth (pydantic's exclude_none)."""
    if isinstance(data, dict):
        return {k: without_none(v) for k, v in data.items() if v is not None}
    if isinstance(data, list):
        return [without_none(v) for v in data]
    return data


def dumps(data, *, indent: int | None = 2) -> str:
    """JSON text of plain data, laid out and with numbers formatted as pydantic's dump_json writes them."""
    out: list[str] = []
    _write(data, out, indent, 0)
    return "".join(out)


@lru_cache(maxsize=None)
def _deferred(name: str) -> type:
    """A stand-in for a record class named only under TYPE_CHECKING (not imported): matched by name."""
    return type(name, (), {"__deferred__": True})


class _Names(dict):
    """Local names for evaluating an annotation: a name the module does not define becomes a deferred
    stand-in, so resolving `Cost | None` does not import the cost module for a plan that has no cost."""

    def __init__(self, module_globals: dict):
        super().__init__()
        self.module_globals = module_globals

    def __missing__(self, name: str):
        if name in self.module_globals or hasattr(builtins, name):
            raise KeyError(name)  # eval falls through to the module's globals and the builtins
        return _deferred(name)


@lru_cache(maxsize=None)
def _field_types(cls) -> dict[str, Any]:
    """Field name -> declared type, each annotation evaluated in the module of the class declaring it."""
    if not dataclasses.is_dataclass(cls):
        raise ContractError(f"{cls.__qualname__} is not a record")
    declared_in = {}
    for base in reversed(cls.__mro__):
        for name in base.__dict__.get("__annotations__", {}):
            declared_in[name] = base.__module__
    return {f.name: annotation(f.type, declared_in[f.name], _Names) if isinstance(f.type, str) else f.type
            for f in dataclasses.fields(cls)}


def _fail(path: str, expected: str, value) -> typing.NoReturn:
    raise ContractError(f"{path}: expected {expected}, got {type(value).__name__} {value!r:.60}")


def _convert(value, tp, path: str):
    if tp is Any:
        return _infer(value, path)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _union(value, typing.get_args(tp), path)
    if origin is typing.Literal:
        if value not in typing.get_args(tp):
            _fail(path, f"one of {typing.get_args(tp)}", value)
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            _fail(path, "a list", value)
        args = typing.get_args(tp)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(value):
                _fail(path, f"{len(args)} items", value)
            return [_convert(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(value, args))]
        item = args[0] if args else Any
        return [_convert(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            _fail(path, "an object", value)
        key_type, value_type = typing.get_args(tp) or (str, Any)
        return {_key(k, key_type, path): _convert(v, value_type, f"{path}.{k}") for k, v in value.items()}
    if tp is type(None) or tp is None:
        if value is not None:
            _fail(path, "null", value)
        return None
    if tp is bool:
        if not isinstance(value, bool):
            _fail(path, "a boolean", value)
        return value
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return int(value)
        if isinstance(value, float) and value.is_integer():
            return int(value)  # pydantic's lax mode takes 3.0 for an int
        _fail(path, "an integer", value)
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value) if math.isfinite(value) else None
        _fail(path, "a number", value)
    if tp is str:
        if not isinstance(value, str):
            _fail(path, "a string", value)
        return str(value)
    if getattr(tp, "__deferred__", False):
        if not (dataclasses.is_dataclass(value) and type(value).__name__ == tp.__name__):
            _fail(path, tp.__name__, value)
        return record_data(value, path=path)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, tp):
            _fail(path, tp.__qualname__, value)
        return record_data(value, path=path)
    raise ContractError(f"{path}: the JSON writer does not handle the declared type {tp!r}")


def _union(value, args: tuple, path: str):
    if value is None:
        if type(None) in args:
            return None
        _fail(path, " | ".join(getattr(a, "__name__", str(a)) for a in args), value)
    options = [a for a in args if a is not type(None)]
    exact = [a for a in options if isinstance(a, type) and type(value) is a]  # pydantic's smart mode
    for option in exact + [a for a in options if a not in exact]:
        try:
            return _convert(value, option, path)
        except ContractError:
            continue
    _fail(path, " | ".join(getattr(a, "__name__", str(a)) for a in options), value)


def _key(key, key_type, path: str) -> str:
    if key_type is str and not isinstance(key, str):
        _fail(path, "string keys", key)
    return str(key)


def _infer(value, path: str):
    """A value declared `Any`: written by what it is, as pydantic's inferring serializer does."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return [_infer(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {str(k): _infer(v, f"{path}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return record_data(value, path=path)
    _fail(path, "JSON data", value)


def _float(x: float) -> str:
    """pydantic-core's float text: Python's shortest repr, but 1e-5..1e-4 positional and no zero-padded exponent."""
    if not math.isfinite(x):
        return "null"
    text = repr(x)
    mantissa, e, exponent = text.partition("e")
    if not e:
        return text
    power = int(exponent)
    if power == -5:
        sign = "-" if mantissa.startswith("-") else ""
        return f"{sign}0.0000{mantissa.lstrip('-').replace('.', '')}"
    return f"{mantissa}e{power:+d}"


def _write(x, out: list[str], indent: int | None, level: int) -> None:
    if x is None:
        out.append("null")
    elif x is True:
        out.append("true")
    elif x is False:
        out.append("false")
    elif isinstance(x, int):
        out.append(int.__repr__(x))
    elif isinstance(x, float):
        out.append(_float(x))
    elif isinstance(x, str):
        out.append(encode_basestring(x))
    elif isinstance(x, (dict, list)):
        is_dict = isinstance(x, dict)
        opening, closing = ("{", "}") if is_dict else ("[", "]")
        if not x:
            out.append(opening + closing)
            return
        inner = "" if indent is None else "\n" + " " * (indent * (level + 1))
        out.append(opening)
        for i, item in enumerate(x.items() if is_dict else x):
            out.append(("," if i else "") + inner)
            if is_dict:
                out.append(encode_basestring(item[0]) + (":" if indent is None else ": "))
                item = item[1]
            _write(item, out, indent, level + 1)
        out.append("" if indent is None else "\n" + " " * (indent * level))
        out.append(closing)
    else:
        raise ContractError(f"cannot write {type(x).__name__} as JSON")
