"""Typed records without pydantic at run time.

The estimator's inputs and results are keyword-only dataclasses: building one costs microseconds and
importing this module costs nothing, which keeps `fitprobe plan` starting in well under a second on a
small machine (importing pydantic alone takes 0.1–0.2 s there). pydantic still describes and validates
these same classes where that is worth its import: the JSON Schema of the contract (`fitprobe.contract`)
and catalog files that have changed since they were last validated (`fitprobe.catalogs.validated`);
`fitprobe.record_json` writes them as JSON, type-checked, without it.

`doc()` declares a field with its description (read into the JSON Schema) and numeric bounds, which
`record` checks on every construction, so an impossible value fails where it is made.
"""
from __future__ import annotations

import builtins
import dataclasses
import sys
from dataclasses import MISSING, Field, asdict, fields, replace  # noqa: F401  (re-exported)
from functools import lru_cache

__all__ = ["record", "doc", "asdict", "replace", "fields", "annotation"]


def doc(description: str = "", *, default=MISSING, default_factory=MISSING,
        gt: float | None = None, ge: float | None = None, le: float | None = None) -> Field:
    """A dataclass field with a description and optional bounds (gt/ge/le), like pydantic's Field."""
    bounds = {k: v for k, v in (("gt", gt), ("ge", ge), ("le", le)) if v is not None}
    metadata = {"description": description} if description else {}
    if bounds:
        metadata["bounds"] = bounds
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def _check_bounds(obj, bounded: tuple[tuple[str, dict], ...]) -> None:
    for name, bounds in bounded:
        value = getattr(obj, name)
        if value is None:
            continue
        if "gt" in bounds and not value > bounds["gt"]:
            raise ValueError(f"{name} must be greater than {bounds['gt']:g}, got {value!r}")
        if "ge" in bounds and not value >= bounds["ge"]:
            raise ValueError(f"{name} must be at least {bounds['ge']:g}, got {value!r}")
        if "le" in bounds and not value <= bounds["le"]:
            raise ValueError(f"{name} must be at most {bounds['le']:g}, got {value!r}")


def record(cls):
    """Make `cls` a keyword-only dataclass whose doc() bounds are checked in __post_init__."""
    bounded = [(f.name, f.metadata["bounds"]) for base in cls.__mro__[1:] if dataclasses.is_dataclass(base)
               for f in fields(base) if "bounds" in f.metadata]
    bounded += [(name, value.metadata["bounds"]) for name, value in vars(cls).items()
                if isinstance(value, Field) and "bounds" in value.metadata]
    if bounded:
        own_post_init = cls.__dict__.get("__post_init__")
        checks = tuple(bounded)

        def __post_init__(self) -> None:
            _check_bounds(self, checks)
            if own_post_init is not None:
                own_post_init(self)

        cls.__post_init__ = __post_init__
    cls.__pydantic_config__ = {"extra": "forbid"}  # a plain dict: pydantic reads it when it validates
    own = cls.__dict__
    if not own.get("__doc__"):
        # dataclass() would write "Name(<signature>)" here through inspect.signature (~0.3 ms a class);
        # pydantic's JSON Schema leaves a doc of that form out either way
        cls.__doc__ = f"{cls.__name__}(...)"
    # dataclass() writes each generated method as source and compiles it (parsing those functions was
    # ~15% of a `fitprobe plan` answer's instructions): __init__, __repr__ and __eq__ are shared generic
    # functions instead, with the same keyword-only signature rules.
    cls = dataclasses.dataclass(kw_only=True, init=False, repr=False, eq=False)(cls)
    if "__init__" not in own:
        cls.__init__ = _keyword_init(cls)
    if "__repr__" not in own:
        cls.__repr__ = _repr
    if "__eq__" not in own:
        cls.__eq__ = _eq
        cls.__hash__ = None  # mutable records are unhashable, as dataclass(eq=True) makes them
    return cls


def _keyword_init(cls):
    """The __init__ dataclass(kw_only=True) would generate: each field from its keyword, else its
    default (or a fresh default_factory value), set in field order; then __post_init__."""
    plan = tuple((f.name, f.default, f.default_factory) for f in fields(cls))
    names = frozenset(name for name, _, _ in plan)
    post_init = hasattr(cls, "__post_init__")
    where = f"{cls.__qualname__}.__init__()"

    def __init__(self, **values):
        if not values.keys() <= names:
            unexpected = sorted(values.keys() - names)
            raise TypeError(f"{where} got an unexpected keyword argument '{unexpected[0]}'")
        state = self.__dict__
        for name, default, factory in plan:
            if name in values:
                state[name] = values[name]
            elif factory is not MISSING:
                state[name] = factory()
            elif default is not MISSING:
                state[name] = default
            else:
                missing = [n for n, d, f in plan if n not in values and d is MISSING and f is MISSING]
                raise TypeError(f"{where} missing {len(missing)} required keyword-only argument(s): "
                                + ", ".join(f"'{n}'" for n in missing))
        if post_init:
            self.__post_init__()

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


@lru_cache(maxsize=None)
def annotation(text: str, module: str, names=None):
    """A field's annotation text (these modules use `from __future__ import annotations`) evaluated in
    the module that declares it, each distinct text once: fields share a few ('str', 'int | None'), and
    typing.get_type_hints compiles every one anew. `names(module globals)`: a mapping for names the
    module lacks (fitprobe.record_json's stand-ins)."""
    namespace = sys.modules[module].__dict__
    if text.isidentifier() and text in namespace:
        return namespace[text]
    if text.isidentifier() and hasattr(builtins, text):
        return getattr(builtins, text)
    return eval(text, namespace, None if names is None else names(namespace))


def _repr(self) -> str:
    inner = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
    return f"{type(self).__qualname__}({inner})"


def _eq(self, other) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(self) if f.compare)

