"""Quantization formats and ggml block sizes, loaded from catalogs/data/quant_formats.json."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from fitprobe.catalogs.validated import load_json_file
from fitprobe.estimator.quant import MeasuredFile, QuantFormat, QuantTable

PATH = Path(__file__).parent / "data" / "quant_formats.json"
SPREAD_PATH = Path(__file__).parent / "data" / "quant_spread.json"  # written by scripts/quant_spread.py


@lru_cache(maxsize=1)
def quant_table() -> QuantTable:
    """The formats, with their published files measured against the formula (the spread of approximate ones)."""
    table = load_json_file(QuantTable, PATH)
    for fmt in table.formats:
        if fmt.kind == "gguf" and fmt.ftype is None:
            raise ValueError(f"quant format {fmt.name} is GGUF but names no ftype")
    table.measured = load_json_file(list[MeasuredFile], SPREAD_PATH, key="files")
    return table


def find_quant(name: str) -> QuantFormat:
    fmt = quant_table().find(name)
    if fmt is None:
        names = ", ".join(f.name for f in quant_table().formats)
        raise ValueError(f"unknown quantization '{name}' (choose from: {names})")
    return fmt
