"""Weights: fitprobe's per-tensor GGUF type and bytes equal `llama-quantize --dry-run`'s, tensor by tensor."""
from __future__ import annotations

import struct

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


def kept_mxfp4(spec, fmt, name: str) -> bool:
    """gpt-oss experts: fitprobe sizes the published GGUFs, whose experts stay MXFP4 at every type; plain
    llama-quantize would requantize them (a known, documented difference, not checked here)."""
    mxfp4 = spec.prequant is not None and spec.prequant.method == "mxfp4"
    return mxfp4 and fmt.ftype != "MXFP4_MOE" and "_exps." in name


def _rows(shape: tuple[int, ...]) -> int:
    rows = 1
    for n in shape[1:]:
        rows *= n
    return rows


def legacy_imatrix(spec, path) -> str:
    """An importance matrix in llama.cpp's legacy format (common/imatrix-loader.cpp) for one tensor of the
    first block. Its values never matter to a dry run; its presence switches
    llama-quantize to the with-imatrix rules (qs.has_imatrix, src/llama-quant.cpp l. 1001), the way fitprobe's
    `imatrix=True` does. (One entry keeps the file small; a full one for a 128-expert model is 150 MB.)"""
    t = next(t for t in inventory(spec) if t.quantizable and t.layer == 0 and not t.expert)
    name = t.name.encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<i", 1) + struct.pack("<i", len(name)) + name + struct.pack("<ii", 1, t.shape[0]))
        f.write(struct.pack(f"<{t.shape[0]}f", *([1.0] * t.shape[0])))
    return str(path)


@pytest.mark.parametrize("model", supported_models())
def test_every_tensor_type_and_size(model, llama_bin, source_gguf, table, tmp_path):
    spec = spec_of(model)
    shapes = {t.name: t.shape for t in inventory(spec) if not t.vision and not t.mtp}
    path = source_gguf(model)
    mismatches = []
    imatrix = legacy_imatrix(spec, tmp_path / "imatrix.dat")
    # every type without an importance matrix; the IQ types (which llama.cpp makes with one) also with one
    runs = [(fmt, False) for fmt in gguf_formats()] + [(f, True) for f in gguf_formats() if f.ftype.startswith("IQ")]
    for fmt, with_imatrix in runs:
        if fmt.ftype == "MXFP4_MOE" and spec.moe is None:
            continue
        theirs, quant_mib = quantize_dry_run(str(llama_bin / "llama-quantize"), path, fmt.ftype,
                                             imatrix=imatrix if with_imatrix else None)
        assert len(theirs) == len(shapes), f"{model}: llama-quantize saw {len(theirs)} tensors, fitprobe {len(shapes)}"
        ours = tensor_types(spec, fmt, imatrix=with_imatrix)
        total = 0
        for t in theirs:
            assert t.shape == shapes[t.name], f"{model} {t.name}: llama.cpp shape {t.shape}, fitprobe {shapes[t.name]}"
            if ours[t.name] != t.type and not kept_mxfp4(spec, fmt, t.name):
                mismatches.append(f"{fmt.name}{'+imatrix' if with_imatrix else ''} {t.name}: fitprobe {ours[t.name]}, llama.cpp {t.type}")
            theirs_bytes = llama_bytes(t.shape, t.type)
            ours_bytes = table.ggml_types[ours[t.name]].row_bytes(t.shape[0]) * (t_rows := _rows(t.shape))
            if ours_bytes != theirs_bytes and ours[t.name] == t.type:
                mismatches.append(f"{fmt.name} {t.name}: {t.type} is {ours_bytes} B in fitprobe's table, "
                                  f"{theirs_bytes} B in ggml ({t_rows} rows)")
            total += ours_bytes if kept_mxfp4(spec, fmt, t.name) else theirs_bytes
        if not any(kept_mxfp4(spec, fmt, t.name) for t in theirs):
            assert abs(total / MIB - quant_mib) <= 0.005 + 1e-9, f"{model} {fmt.name}: {total / MIB:.3f} vs {quant_mib}"
        if not mismatches:
            assert weight_bytes(spec, fmt, table, imatrix=with_imatrix).total == total, f"{model} {fmt.name} total bytes"
    assert not mismatches, f"{model}: {len(mismatches)} tensor types differ, first: " + "; ".join(mismatches[:5])
