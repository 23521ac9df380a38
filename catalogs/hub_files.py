"""GGUF file names on the Hub -> quant names and size groups.

Pure functions (no network) so the grouping rules can be tested on real listings.
Split files follow llama.cpp's `gguf-split` naming `<stem>-00001-of-00003.gguf`; the quant
name is the last quant-looking token of the stem (or of the folder, as unsloth repos use
`Q4_K_M/<model>-Q4_K_M-00001-of-00002.gguf`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from fitprobe.estimator.fields import record

# llama.cpp quant names (k-quants, i-quants, legacy, ternary, float) plus unsloth's "UD-" prefix
# and the `_L`/`_XL` suffixes bartowski/unsloth use for mixes with Q8_0 embeddings.
_QUANT = r"(?:UD-)?(?:I?Q\d(?:_[0-9A-Z]{1,3}){0,3}|TQ\d_\d|MXFP4(?:_MOE)?|NVFP4|BF16|FP16|F16|FP32|F32)"
# Patterns, not compiled ones: `re` compiles each on first use (a Hub id without GGUF files never does).
_QUANT_AT_END = rf"(?:^|[-._])({_QUANT})$"
_QUANT_ANYWHERE = rf"(?:^|[-._])({_QUANT})(?=$|[-._])"
_SPLIT = r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<total>\d{5})\.gguf$"
_ALIASES = {"FP16": "F16", "FP32": "F32"}


@record
class GgufQuantFile:
    """One downloadable GGUF variant: all parts of a split file, with their summed size."""

    quant: str
    filenames: list[str]
    size_bytes: int | None
    parts_expected: int = 1
    complete: bool = True


def quant_from_name(path: str) -> str | None:
    """Quant name from a GGUF path (`UD-Q4_K_XL`, `IQ2_XXS`, `BF16`...), or None."""
    folder, _, base = path.rpartition("/")
    m = re.match(_SPLIT, base, re.IGNORECASE)
    stem = m.group("stem") if m else re.sub(r"\.gguf$", "", base, flags=re.IGNORECASE)
    for text in (stem, folder.rpartition("/")[2]):
        if not text:
            continue
        hit = re.search(_QUANT_AT_END, text, re.IGNORECASE)
        if hit is None:
            found = re.findall(_QUANT_ANYWHERE, text, re.IGNORECASE)
            hit_text = found[-1] if found else None
        else:
            hit_text = hit.group(1)
        if hit_text:
            q = hit_text.upper()
            return _ALIASES.get(q, q)
    return None


def is_mmproj(path: str) -> bool:
    """Vision projector files ship next to the LLM weights but are not a quant of it."""
    return "mmproj" in path.rpartition("/")[2].lower()


def group_gguf_files(files: Iterable[tuple[str, int | None]], mmproj: bool = False) -> list[GgufQuantFile]:
    """Group `(path, size)` pairs of .gguf files into quant variants, split parts together.

    mmproj=False keeps the LLM weights, mmproj=True only the vision projectors.
    A size is None when the listing did not give it; the group's size is then None too.
    """
    groups: dict[tuple[str, str], dict] = {}
    for path, size in files:
        if not path.lower().endswith(".gguf") or is_mmproj(path) != mmproj:
            continue
        folder, _, base = path.rpartition("/")
        m = re.match(_SPLIT, base, re.IGNORECASE)
        key = (folder, m.group("stem") if m else base)
        g = groups.setdefault(key, {"parts": [], "total": int(m.group("total")) if m else 1})
        g["parts"].append((int(m.group("part")) if m else 1, path, size))
    out = []
    for (_folder, _stem), g in groups.items():
        parts = sorted(g["parts"])
        sizes = [s for _, _, s in parts]
        complete = len(parts) == g["total"] and [p for p, _, _ in parts] == list(range(1, g["total"] + 1))
        out.append(
            GgufQuantFile(
                quant=quant_from_name(parts[0][1]) or "unknown",
                filenames=[p for _, p, _ in parts],
                size_bytes=None if any(s is None for s in sizes) else sum(sizes),
                parts_expected=g["total"],
                complete=complete,
            )
        )
    return sorted(out, key=lambda q: (q.size_bytes is None, q.size_bytes or 0, q.quant))


def pick_quant(files: list[GgufQuantFile], quant: str) -> list[GgufQuantFile]:
    """Variants matching a requested quant name, case-insensitive (`q4_k_m` == `Q4_K_M`)."""
    want = _ALIASES.get(quant.upper(), quant.upper())
    return [f for f in files if f.quant == want]
