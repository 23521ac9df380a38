"""Which kernels llama.cpp's CUDA/HIP backend multiplies a micro-batch with, where they are its slow paths.

A quantized matmul that MMQ declines (ggml_cuda_mul_mat, ggml-cuda.cu) runs through cuBLAS/hipBLAS on an F16
copy of the weights, which it writes first.

ggml_cuda_mul_mat_id (ggml-cuda.cu, build b11434) multiplies all routed experts of a micro-batch in one
grouped kernel when it can: MMVQ for a few tokens, MMQ for quantized experts (ggml_cuda_should_use_mmq,
mmq.cu), MMF for F16/BF16 ones (ggml_cuda_should_use_mmf, mmf.cu). When none accepts the batch it takes the
sorted path: it copies the router's choices to the host and synchronises the stream, sorts the tokens by
expert, uploads the order and synchronises again, gathers the rows, then launches one ordinary matmul per
expert that received tokens (quantized experts with few tokens: activation quantization + MMQ; otherwise the
cuBLAS path: dequantize to F16, convert the activations, GEMM), and scatters the results back. A Volta GPU
(FP16 tensor cores but no integer MMA) takes it for every quantized micro-batch of 64 tokens or more, so a
256-expert model prefills there ~5× slower than its FLOPs say (published V100 runs, 2026).
"""
from __future__ import annotations

from functools import lru_cache
from math import exp, lgamma, log

# mmq.cuh MMQ_DP4A_MAX_BATCH_SIZE: with FP16 tensor cores but no integer MMA, MMQ only below 64 tokens.
MMQ_DP4A_MAX_BATCH = 64
# mmvq.cu get_mmvq_mmid_max_batch_*: up to 4-8 tokens the grouped matrix-vector kernel runs (4: the least).
MMVQ_MIN_BATCH = 4
# The sorted path's launches around the per-expert matmuls: the ids' copy to the host and its
# synchronisation, the order's upload and its synchronisation, the gather and the scatter (get_rows ×2).
SORTED_CALL_LAUNCHES = 6


def _nvidia_cc(cc: str | None) -> float | None:
    try:
        return float(cc) if cc else None
    except ValueError:
        return None


# GGML_CUDA_CC_DP4A (ggml-cuda/common.cuh): below it ggml_cuda_dp4a falls back to byte-wise multiply-adds.
CUDA_DP4A_MIN_CC = 6.1


def lacks_dp4a(cc_name: str | None) -> bool:
    """Whether an NVIDIA GPU of compute capability `cc_name` has no dp4a (unknown or AMD: not known to lack it)."""
    cc = _nvidia_cc(cc_name)
    return cc is not None and cc < CUDA_DP4A_MIN_CC


def _amd_gfx(cc: str | None) -> int | None:
    """gfx1100 → 0x1100, gfx90a → 0x90a: ggml's AMD compute-capability numbers."""
    cc = (cc or "").lower()
    if not cc.startswith("gfx"):
        return None
    try:
        return int(cc[3:], 16)
    except ValueError:
        return None


def _cdna(gfx: int) -> bool:
    """GGML_CUDA_CC_IS_CDNA: MI100 (gfx908) up to RDNA1, less the GCN APUs gfx909/gfx90c."""
    return 0x908 <= gfx < 0x1010 and gfx not in (0x909, 0x90C)


def _cdna3(gfx: int) -> bool:
    """GGML_CUDA_CC_IS_CDNA3: MI300 (gfx942) up to CDNA4 (gfx950)."""
    return 0x942 <= gfx < 0x950


def _format(quant: str) -> str:
    """The format's name as llama.cpp's types read it: 'UD-Q4_K_XL' → 'Q4_K_XL'."""
    return quant.upper().removeprefix("UD-")


def _mmq_accepts(cc_name: str | None, quant: str, tokens: int, n_experts: int) -> bool:
    """ggml_cuda_should_use_mmq for a quantized type; `n_experts` 0 for an ordinary matmul."""
    cc = _nvidia_cc(cc_name)
    if cc is not None:
        if cc >= 7.5:  # Turing integer MMA
            return True
        if cc < CUDA_DP4A_MIN_CC:  # no dp4a: MMQ for MoE only, from Pascal on
            return cc >= 6.0 and n_experts > 0
        return cc < 7.0 or tokens < MMQ_DP4A_MAX_BATCH  # FP16 tensor cores (Volta) beat dp4a MMQ on big batches
    gfx = _amd_gfx(cc_name)
    if gfx is None:
        return True
    q = _format(quant)
    if _cdna(gfx):
        if _cdna3(gfx):  # rocBLAS slow there
            return True
        if n_experts > 64 or tokens <= 128 or q.startswith(("Q4_0", "Q4_1", "Q5_0", "Q5_1")):
            return True
        return tokens <= 256 and q.startswith(("Q4_K", "Q5_K"))
    if gfx >= 0x1200:  # RDNA4: MMQ always faster
        return True
    if gfx >= 0x1100:  # RDNA3: hipBLAS wins for a few types on big batches, unless many experts
        if n_experts >= 64:
            return True
        if q.startswith("Q2_K"):
            return tokens <= 128
        if q.startswith("Q6_K"):
            return tokens <= (128 if gfx < 0x1150 else 256)
        if q.startswith(("IQ2_XS", "IQ2_S")):
            return gfx >= 0x1150 or tokens <= 128
        return True
    if gfx in (0x900, 0x909, 0x90C):  # Vega 10 / GCN APUs: no dp4a, MMQ for MoE only
        return n_experts > 0
    return True


def _mmf_accepts(cc_name: str | None, dtype: str, tokens: int, rows: int) -> bool:
    """ggml_cuda_should_use_mmf for a mul_mat_id over F16/BF16 experts of `rows` output rows."""
    if (rows <= 1024 and tokens > 512) or (rows > 1024 and tokens > 128):
        return False
    cc = _nvidia_cc(cc_name)
    if cc is not None:
        return cc >= 8.0 if dtype == "BF16" else cc >= 7.0
    gfx = _amd_gfx(cc_name)
    if gfx is None:
        return True
    if _cdna3(gfx) and dtype == "BF16":
        return False
    return _cdna(gfx) or gfx >= 0x1100  # MFMA (CDNA) or WMMA (RDNA3/4)


# Formats whose weights stay in a float type (quant_family's "f16"): no MMQ, MMF or cuBLAS on the weights as stored.
UNQUANTIZED = frozenset({"F16", "BF16", "F32", "NATIVE", "FP16"})


def _unquantized(quant: str) -> bool:
    return _format(quant) in UNQUANTIZED


def _binomial(n: int, p: float):
    """(x, P(X = x)) for X ~ Binomial(n, p), x = 1..n: the tokens one expert gets of a micro-batch of n."""
    for x in range(1, n + 1):
        yield x, exp(lgamma(n + 1) - lgamma(x + 1) - lgamma(n - x + 1) + x * log(p) + (n - x) * log(1 - p))


@lru_cache(maxsize=4096)
def sorted_path(cc: str | None, quant: str, tokens: int, n_experts: int, rows: int) -> bool:
    """Whether a mul_mat_id of `tokens` tokens over `n_experts` experts (each `rows` output rows) takes the
    sorted, per-expert path on a GPU of compute capability `cc` ("7.0", "gfx1100")."""
    if tokens <= MMVQ_MIN_BATCH:
        return False
    if _unquantized(quant):
        return not _mmf_accepts(cc, "BF16" if _format(quant) == "BF16" else "F16", tokens, rows)
    return not _mmq_accepts(cc, quant, tokens, n_experts)


@lru_cache(maxsize=4096)
def dequantizes(cc: str | None, quant: str, tokens: int) -> bool:
    """Whether an ordinary matmul over `tokens` tokens (a dense one, or one expert's on the sorted path) takes the
    cuBLAS path with quantized weights: it writes an F16 copy of the matrix, which the GEMM then reads."""
    return not _unquantized(quant) and tokens > MMVQ_MIN_BATCH and not _mmq_accepts(cc, quant, tokens, 0)


@lru_cache(maxsize=1024)
def expert_matmuls(cc: str | None, quant: str, tokens: int, n_used: int, n_experts: int) -> tuple[float, float]:
    """(launches, F16 copies) expected per expert a micro-batch reaches on the sorted path. An expert's token
    count is Binomial(tokens, k/E), given it got one: quantized experts with few tokens run activation
    quantization + MMQ (2 launches), the others the cuBLAS path (dequantize to F16, convert the activations,
    GEMM: 3, and an F16 copy); F16/BF16 experts: conversion + GEMM."""
    if _unquantized(quant):
        return 2.0, 0.0
    p = n_used / n_experts
    if p >= 1:
        return (2.0, 0.0) if not dequantizes(cc, quant, tokens) else (3.0, 1.0)
    reached = 1 - (1 - p) ** tokens
    copies = sum(pmf for x, pmf in _binomial(tokens, p) if dequantizes(cc, quant, x))
    copies = min(1.0, copies / reached)
    return 2.0 + copies, copies


# The tile widths (columns, i.e. tokens) MMQ has a kernel for: the non-fallback configurations of the pinned build's
# mmq-config-*.cuh (ampere: Volta to Hopper, and Blackwell for most types; pascal-dp4a, rdna2 and gcn stop at 64;
# cdna at 64 with a step of 16).
_TILES_NVIDIA = (8, 16, 24, 32, 40, 48, 64, 80, 96, 112, 128)
_TILES_TO_64 = (8, 16, 24, 32, 40, 48, 64)
_TILES_CDNA = (16, 32, 48, 64)


def _tile_widths(cc_name: str | None) -> tuple[int, ...] | None:
    """MMQ's tile widths where it sizes them by the micro-batch; None on RDNA3/RDNA4, where mmq.cu sizes them by
    the tokens per expert (ncols_opt = ne12·k/E), so that an expert pays at most one partly filled tile."""
    cc = _nvidia_cc(cc_name)
    if cc is not None:
        return _TILES_NVIDIA if cc >= 7.0 else _TILES_TO_64
    gfx = _amd_gfx(cc_name)
    if gfx is None:
        return _TILES_NVIDIA
    if gfx >= 0x1100:
        return None
    return _TILES_CDNA if _cdna(gfx) else _TILES_TO_64


@lru_cache(maxsize=4096)
def expert_tiles(cc: str | None, quant: str, tokens: int, n_used: int, n_experts: int) -> tuple[int, float] | None:
    """(J, tiles) for a micro-batch whose routed experts run in MMQ's grouped kernel, with tiles sized by the
    micro-batch: the width J mul_mat_q_switch_J picks (the narrowest with the fewest tiles over the micro-batch's
    columns: 128 from 128 tokens up on NVIDIA) and the J-column tiles an expert the micro-batch reaches computes,
    on average (its Binomial(tokens, k/E) tokens rounded up to whole tiles; mul_mat_q returns early on empty
    ones). None where MMQ does not run the experts (MMVQ, MMF, the sorted path) or sizes tiles per expert."""
    widths = _tile_widths(cc)
    if not widths or tokens <= MMVQ_MIN_BATCH or _unquantized(quant) or not _mmq_accepts(cc, quant, tokens, n_experts):
        return None
    j = min(widths, key=lambda w: (-(-tokens // w), w))
    p = min(1.0, n_used / n_experts)
    if p >= 1:
        return j, float(-(-tokens // j))
    reached = 1 - (1 - p) ** tokens
    return j, sum(pmf * -(-x // j) for x, pmf in _binomial(tokens, p)) / reached
