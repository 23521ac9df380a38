"""The pinned llama.cpp build (scripts/build_llama_cpp.sh) and sparse GGUFs of the bundled models.

Found through FITPROBE_LLAMA_CPP_BIN or the build cache. Without it these tests skip, saying so loudly;
with FITPROBE_REQUIRE_LLAMA_CPP=1 (set by .ci/run after a successful build) a missing build fails them.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path

import pytest

from fitprobe.catalogs.models import load_models
from fitprobe.catalogs.quants import quant_table
from fitprobe.estimator.config import spec_from_config
from fitprobe.estimator.quant import source_types
from fitprobe.llama_tools import TOOLS, cache_bin_dir, find_bin_dir
from fitprobe.sparse_gguf import LLAMA_ARCH, write_sparse_gguf


def _bin_dir() -> Path:
    found = find_bin_dir()
    if found is None or not all((found / t).is_file() for t in TOOLS):
        reason = (f"LLAMA.CPP DIFFERENTIAL TESTS SKIPPED: no pinned llama.cpp build at {found or cache_bin_dir()} "
                  "(run scripts/build_llama_cpp.sh or set FITPROBE_LLAMA_CPP_BIN)")
        if os.environ.get("FITPROBE_REQUIRE_LLAMA_CPP") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


@pytest.fixture(scope="session")
def llama_bin() -> Path:
    return _bin_dir()


@pytest.fixture(scope="session")
def table():
    return quant_table()


def mapped_models() -> list[str]:
    """Every bundled model whose architecture the sparse-GGUF writer maps to llama.cpp."""
    out = []
    for entry in load_models():
        cfg = entry.config.get("text_config") or entry.config
        if cfg.get("model_type") in LLAMA_ARCH or entry.config.get("model_type") in LLAMA_ARCH:
            out.append(entry.name)
    return sorted(out)


@functools.cache
def supported_models() -> list[str]:
    """One model per distinct network among the mapped ones, in name order.

    Catalog entries that size identically (a distill or an -Instruct of the same network, a dated re-release,
    a checkpoint of another precision: equal ModelSpec but for name and Hub id) write the same sparse GGUF, so
    llama.cpp would answer the same for each; the first name stands for the rest (`same_network_as`).
    """
    return sorted({_network(m): m for m in reversed(mapped_models())}.values())


def same_network_as() -> dict[str, str]:
    """Each mapped model the suite leaves out -> the model whose identical network it runs instead."""
    first = {_network(m): m for m in reversed(mapped_models())}
    return {m: first[_network(m)] for m in mapped_models() if first[_network(m)] != m}


@functools.cache
def _network(name: str) -> str:
    return repr(dataclasses.replace(spec_of(name), name="", hf_id=None))


def spec_of(name: str):
    entry = next(e for e in load_models() if e.name == name)
    return spec_from_config(entry.config, name=entry.name, hf_id=entry.hf_id)


@pytest.fixture(scope="session")
def source_gguf(tmp_path_factory):
    """The 16-bit GGUF the converter would write for a bundled model (data left sparse), one per model."""
    made: dict[str, Path] = {}

    def make(name: str) -> Path:
        if name not in made:
            spec = spec_of(name)
            path = tmp_path_factory.mktemp("gguf") / f"{name}-source.gguf"
            write_sparse_gguf(spec, path, source_types(spec))
            made[name] = path
        return made[name]

    return make
