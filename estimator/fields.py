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

import dataclasses
from dataclasses import MISSING, Field, asdict, fields, replace  # noqa: F401  (re-exported)

__all__ = ["record", "doc", "asdict", "replace", "fields"]


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
    # dataclass() compiles each generated method with exec (about 0.4 ms apiece on a small machine);
    # __repr__ and __eq__ are shared generic functions instead, so only __init__ is generated.
    cls = dataclasses.dataclass(kw_only=True, repr=False, eq=False)(cls)
    if "__repr__" not in own:
        cls.__repr__ = _repr
    if "__eq__" not in own:
        cls.__eq__ = _eq
        cls.__hash__ = None  # mutable records are unhashable, as dataclass(eq=True) makes them
    return cls


def _repr(self) -> str:
    inner = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
    return f"{type(self).__qualname__}({inner})"


def _eq(self, other) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(self) if f.compare)

