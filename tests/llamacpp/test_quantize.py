"""Weights: fitprobe's per-tensor GGUF type and bytes equal `llama-quantize --dry-run`'s, tensor by tensor."""
from __future__ import annotations

import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from fitprobe.estimator.quant import tensor_types, weight_bytes
from fitprobe.estimator.tensors import inventory
from fitprobe.llama_tools import MIB, quantize_dry_run

from .conftest import spec_of, supported_models


def gguf_formats():
    from fitprobe.catalogs.quants import quant_table

    # UD-* are Unsloth's own recipes (not a llama-quantize type): checked against published files elsewhere
    return [f for f in quant_table().formats if f.kind == "gguf" and f.ftype and not f.approximate]


def llama_bytes(shape: tuple[int, ...], type_name: str) -> int:
    """Bytes of a tensor the way ggml sizes it (ggml_nrows * ggml_row_size), from gguf's own type table."""
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
    return _rows(shape) * (shape[0] // block) * size


def _rows(shape: tuple[int, ...]) -> int:
    rows = 1
    for n in shape[1:]:
        rows *= n
    return rows


@pytest.mark.parametrize("model", supported_models())
def test_every_tensor_type_and_size(model, llama_bin, source_gguf, table):
    spec = spec_of(model)
    shapes = {t.name: t.shape for t in inventory(spec) if not t.vision and not t.mtp}
    path = source_gguf(model)
    mismatches = []
    for fmt in gguf_formats():
        if fmt.ftype == "MXFP4_MOE" and spec.moe is None:
            continue
        theirs, quant_mib = quantize_dry_run(str(llama_bin / "llama-quantize"), path, fmt.ftype)
        assert len(theirs) == len(shapes), f"{model}: llama-quantize saw {len(theirs)} tensors, fitprobe {len(shapes)}"
        ours = tensor_types(spec, fmt, imatrix=False)
        total = 0
        for t in theirs:
            assert t.shape == shapes[t.name], f"{model} {t.name}: llama.cpp shape {t.shape}, fitprobe {shapes[t.name]}"
            if ours[t.name] != t.type:
                mismatches.append(f"{fmt.name} {t.name}: fitprobe {ours[t.name]}, llama.cpp {t.type}")
            theirs_bytes = llama_bytes(t.shape, t.type)
            ours_bytes = table.ggml_types[ours[t.name]].row_bytes(t.shape[0]) * (t_rows := _rows(t.shape))
            if ours_bytes != theirs_bytes and ours[t.name] == t.type:
                mismatches.append(f"{fmt.name} {t.name}: {t.type} is {ours_bytes} B in fitprobe's table, "
                                  f"{theirs_bytes} B in ggml ({t_rows} rows)")
            total += theirs_bytes
        assert abs(total / MIB - quant_mib) <= 0.005 + 1e-9, f"{model} {fmt.name}: {total / MIB:.3f} vs {quant_mib}"
        if not mismatches:
            assert weight_bytes(spec, fmt, table, imatrix=False).total == total, f"{model} {fmt.name} total bytes"
    assert not mismatches, f"{model}: {len(mismatches)} tensor types differ, first: " + "; ".join(mismatches[:5])
