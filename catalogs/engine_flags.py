"""Each engine's documented options (catalogs/data/engine_flags.json) and a check of a flag set
against them, so a plan never prints an option the engine does not have."""
from __future__ import annotations

from functools import lru_cache

from fitprobe.estimator.fields import record
from fitprobe.catalogs.validated import load_json_file

from . import data_path


@record
class EngineFlag:
    names: list[str]
    value: str | None = None
    choices: list[str] | None = None
    choices_subset: bool = False


@record
class EngineFlags:
    program: str
    version: str
    source: str
    flags: list[EngineFlag]

    def find(self, name: str) -> EngineFlag | None:
        return next((f for f in self.flags if name in f.names), None)


@lru_cache(maxsize=1)
def load_engine_flags() -> dict[str, EngineFlags]:
    return load_json_file(dict[str, EngineFlags], data_path("engine_flags.json"), key="engines")


def check_flags(engine: str, flags) -> list[str]:
    """Problems with a plan's flags ({flag, value} items): unknown option, missing or stray value,
    value outside a complete choice list. Empty when every flag is documented."""
    doc = load_engine_flags().get(engine)
    if doc is None:
        return [f"no documented flags for engine '{engine}'"]
    problems = []
    for f in flags:
        name, value = f.flag, f.value
        known = doc.find(name)
        if known is None:
            problems.append(f"{engine}: '{name}' is not a documented option of {doc.program} ({doc.version})")
            continue
        if known.value is None and value is not None:
            problems.append(f"{engine}: '{name}' is a switch but was given '{value}'")
        if known.value is not None and value is None:
            problems.append(f"{engine}: '{name}' needs a value ({known.value})")
        if known.choices and value is not None and value not in known.choices:
            problems.append(f"{engine}: '{name} {value}' is not one of {', '.join(known.choices)}")
    return problems
