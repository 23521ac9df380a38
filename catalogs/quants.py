"""Quantization formats and ggml block sizes, loaded from catalogs/data/quant_formats.json."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from fitprobe.catalogs.validated import load
from fitprobe.estimator.quant import QuantFormat, QuantTable

PATH = Path(__file__).parent / "data" / "quant_formats.json"


@lru_cache(maxsize=1)
def quant_table() -> QuantTable:
    raw = PATH.read_bytes()
    table = load(QuantTable, json.loads(raw), raw, what="quant_formats.json")
    for fmt in table.formats:
        if fmt.kind == "gguf" and fmt.ftype is None:
            raise ValueError(f"quant format {fmt.name} is GGUF but names no ftype")
    return table


def find_quant(name: str) -> QuantFormat:
    fmt = quant_table().find(name)
    if fmt is None:
        names = ", ".join(f.name for f in quant_table().formats)
        raise ValueError(f"unknown quantization '{name}' (choose from: {names})")
    return fmt
