"""Catalog files are validated by pydantic whenever their content is new, and remembered once valid.

Every load hashes the file bytes together with the shape of the record types they load into. A hash
seen valid before (kept in `$FITPROBE_CACHE_DIR`, default `$XDG_CACHE_HOME/fitprobe` or
`~/.cache/fitprobe`) is built straight into the dataclasses; any other content goes through
`pydantic.TypeAdapter` first, which raises on a wrong type, a missing field or an unknown one. So an
edited catalog is always checked, and an unchanged one does not pay for importing pydantic on every
start. Without a writable cache directory every load validates.
"""
from __future__ import annotations

import dataclasses
import json
import os
import types
import typing
from functools import lru_cache
from pathlib import Path

from fitprobe.estimator.fields import annotation


try:  # CPython's own BLAKE2 (hashlib's too): `import hashlib` loads OpenSSL first, ~10 ms of every start-up;
    # and BLAKE2b digests the ~0.4 MB a plan reads about 3x faster than CPython's SHA-256
    from _blake2 import blake2b
except ImportError:  # another interpreter
    from hashlib import blake2b


class CatalogValidationError(ValueError):
    """A catalog file whose content does not match its record type."""


def cache_dir() -> Path:
    base = os.environ.get("FITPROBE_CACHE_DIR")
    if base:
        return Path(base)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fitprobe"


def _load(tp, data, raw: bytes, *, what: str, check=None):
    """`data` (parsed from `raw`) as an instance of `tp`; validated (and `check`ed) unless this content
    was seen valid."""
    value = _checked(tp, data, raw, what=what, check=check)
    return _build(tp, data) if value is None else value


def _checked(tp, data, raw: bytes, *, what: str, check=None):
    """None when this content was seen valid; else `data` validated (and `check`ed) as `tp`, and remembered."""
    digest = blake2b(_shape(tp).encode() + b"\0" + raw, digest_size=32).hexdigest()
    memo = cache_dir() / "validated-catalogs"
    if (memo / digest).exists():
        return None
    value = _validate(tp, data, what)
    if check is not None:
        try:
            check(value)
        except ValueError as exc:
            raise CatalogValidationError(f"{what} is invalid: {exc}") from None
    try:
        memo.mkdir(parents=True, exist_ok=True)
        (memo / digest).touch()
    except OSError:
        pass  # read-only home: validate every time
    return value


def _validate(tp, data, what: str):
    from pydantic import ValidationError

    try:
        return _adapter(tp).validate_python(data, strict=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "top level"
        raise CatalogValidationError(f"{what} is invalid at {where}: {first['msg']} "
                                     f"({exc.error_count()} error(s))") from None
    except ValueError as exc:  # a record's own bounds check
        raise CatalogValidationError(f"{what} is invalid: {exc}") from None


@lru_cache(maxsize=None)
def _adapter(tp):
    from pydantic import TypeAdapter

    return TypeAdapter(tp)


@lru_cache(maxsize=None)
def _hints(cls) -> dict:
    """typing.get_type_hints(cls): each annotation evaluated in the module of the class declaring it."""
    hints = {}
    for base in reversed(cls.__mro__):
        for name, text in base.__dict__.get("__annotations__", {}).items():
            hints[name] = annotation(text, base.__module__) if isinstance(text, str) else text
    return hints


@lru_cache(maxsize=None)
def _shape(tp) -> str:
    """The field names and types of a record tree: part of the memo key, so a code change revalidates."""
    if dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        return tp.__qualname__ + "{" + ",".join(f"{f.name}:{_shape(hints[f.name])}"
                                                for f in dataclasses.fields(tp)) + "}"
    args = typing.get_args(tp)
    if args:
        return f"{typing.get_origin(tp)}[" + ",".join(_shape(a) for a in args) + "]"
    return repr(tp)


@lru_cache(maxsize=None)
def _nested(tp) -> bool:
    """Whether values of this type hold records that must be constructed (else they pass through)."""
    if dataclasses.is_dataclass(tp):
        return True
    return any(_nested(arg) for arg in typing.get_args(tp))


@lru_cache(maxsize=None)
def _record_fields(cls) -> dict:
    """The fields of a record class whose values need building, with their types."""
    hints = _hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if _nested(hints[f.name])}


def _build(tp, data):
    """Construct records from already-validated plain data (nested dataclasses, lists, dicts, optionals)."""
    if dataclasses.is_dataclass(tp):
        nested = _record_fields(tp)
        if nested:
            data = {k: (_build(nested[k], v) if k in nested else v) for k, v in data.items()}
        return tp(**data)
    origin = typing.get_origin(tp)
    if origin is list:
        (item,) = typing.get_args(tp)
        return [_build(item, x) for x in data]
    if origin is tuple:
        item = typing.get_args(tp)[0]
        return tuple(_build(item, x) for x in data)
    if origin is dict:
        value_type = typing.get_args(tp)[1]
        return {k: _build(value_type, v) for k, v in data.items()}
    if origin in (typing.Union, types.UnionType):
        if data is None:
            return None
        for arg in typing.get_args(tp):
            if arg is not type(None) and _nested(arg):
                return _build(arg, data)
    return data


def load_json_file(tp, path: Path, *, key: str | None = None, what: str | None = None, check=None):
    """Read, parse and load one catalog file (or its top-level `key`) into `tp`; errors name the file.
    `check(value)` raises ValueError on what the types cannot say (names two entries share); it runs
    with the validation, so only on content new to this machine."""
    what = what or path.name
    data, raw = _read(path, key, what)
    return _load(tp, data, raw, what=what, check=check)


def checked_json_file(tp, path: Path, *, key: str | None = None, what: str | None = None, check=None):
    """The plain data of a catalog file (or its top-level `key`), checked as `load_json_file` checks it,
    for a caller that builds only the records a question needs (`build`)."""
    what = what or path.name
    data, raw = _read(path, key, what)
    _checked(tp, data, raw, what=what, check=check)
    return data


def build(tp, data):
    """Records of type `tp` from data `checked_json_file` returned."""
    return _build(tp, data)


def _read(path: Path, key: str | None, what: str) -> tuple[object, bytes]:
    raw = path.read_bytes()
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CatalogValidationError(f"{what} is not valid JSON: {exc}") from None
    if key is not None:
        if not isinstance(data, dict) or key not in data:
            raise CatalogValidationError(f"{what} has no top-level '{key}'")
        data = data[key]
    return data, raw
