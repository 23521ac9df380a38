"""Where every byte goes: weights, KV cache and buffers placed on devices the way each engine does.

llama.cpp / Ollama: the input embedding stays in host RAM; `-ngl N` puts the output layer and
the last N-1 blocks on the GPUs, split over several GPUs by memory (tensor_split); the KV of a
block lives with the block; each GPU holding blocks reserves a compute buffer.
vLLM / SGLang: tensor parallel over all GPUs; weights and KV heads divide by TP (KV never below
one head per rank; MLA latent replicated), each rank keeps its activation peak and overhead.
MLX: everything in unified memory under the Metal working-set limit.
"""
from __future__ import annotations

from fitprobe.estimator.fields import doc, record

from . import buffers
from .hardware import Device, Hardware
from .kv import KvCache, kv_cache
from .message import Num, msg
from .quant import QuantFormat, QuantTable, WeightBytes, head_bytes, weight_bytes
from .settings import RunSettings
from .spec import ModelSpec


@record
class DeviceUsage:
    """One device's share of a plan (the layer split of llama.cpp, a TP rank of vLLM/SGLang)."""

    name: str
    weights_bytes: int
    kv_cache_bytes: int
    buffers_bytes: int
    total_bytes: int
    usable_bytes: int
    layers: int = 0


@record
class MemoryBreakdown:
    """Bytes on the accelerators (summed over devices), what spills to host RAM, and per-device detail."""

    weights_bytes: int
    kv_cache_bytes: int
    buffers_bytes: int
    total_bytes: int
    host_weights_bytes: int = 0
    host_kv_cache_bytes: int = 0
    host_buffers_bytes: int = 0
    model_file_bytes: int = 0  # every text tensor at this quant: the GGUF file / checkpoint size
    gpu_layers: int = 0
    n_layers: int = 0
    per_device: list[DeviceUsage] = doc(default_factory=list)
    kv: KvCache
    notes: list[str] = doc(default_factory=list)

    @property
    def host_total_bytes(self) -> int:
        return self.host_weights_bytes + self.host_kv_cache_bytes + self.host_buffers_bytes


def engine_usable_bytes(hw: Hardware, device: Device, st: RunSettings, *, now: bool = False) -> int:
    """What the engine lets the model use on one device: vLLM takes its utilization share,
    SGLang its static fraction; others the hardware's usable share."""
    usable = hw.usable_bytes(device, now=now)
    if st.engine == "vllm":  # requested_memory = torch.cuda.mem_get_info() total x gpu_memory_utilization
        usable = min(usable, int(driver_total_bytes(device) * st.gpu_memory_utilization))
    return usable


def driver_total_bytes(device: Device) -> int:
    """What vLLM and SGLang take as the device's total: the CUDA-visible total where it is known
    (nvidia-smi's Total minus Reserved), else the physical memory."""
    return device.driver_total_bytes or device.memory_bytes


def estimate(spec: ModelSpec, fmt: QuantFormat, table: QuantTable, st: RunSettings, hw: Hardware, *,
             weights: WeightBytes | None = None, kv: KvCache | None = None, now: bool = False) -> MemoryBreakdown:
    """Size a model on hardware. `weights` may carry exact sizes (real GGUF/safetensors); `kv` a
    cache already computed for these settings (sweeps reuse it across formats)."""
    w = weights or weight_bytes(spec, fmt, table)
    if st.engine in ("vllm", "sglang"):
        return _paged(spec, w, st, hw, now, kv)
    staging = 0
    if st.cpu_moe_layers and hw.devices:
        staging = buffers.llama_cpp_offload_staging_bytes(spec, fmt, table, st, range(min(st.cpu_moe_layers,
                                                                                         spec.n_layers)))
    return _layered(spec, w, st, hw, now, kv or kv_cache(spec, st), staging=staging)


def layer_devices(ngl: int, shares: list[float]) -> list[int]:
    """The device of each of the `ngl` offloaded layers (the last one is the output layer), the way
    llama.cpp assigns them (llama_model::load_tensors): the shares are normalised into cumulative
    split points, and relative layer j goes to the first device whose point exceeds j / ngl. Layer
    counts as shares therefore pin the split exactly; the default shares are device memory."""
    total = float(sum(shares))
    if ngl <= 0 or total <= 0:
        return [0] * max(ngl, 0)
    points, acc = [], 0.0
    for share in shares:
        acc += share
        points.append(acc / total)
    out, dev = [], 0
    for j in range(ngl):
        while dev < len(points) - 1 and not points[dev] > j / ngl:
            dev += 1
        out.append(dev)
    return out


def balanced_split(spec: ModelSpec, w: WeightBytes, st: RunSettings, hw: Hardware, *, now: bool = False,
                   kv: KvCache | None = None) -> tuple[int, ...] | None:
    """Layer counts per device (llama.cpp --tensor-split) that minimise the highest share of usable
    memory any device needs, or None when no split keeps every device within its usable memory.

    Blocks are contiguous (block i before block i+1, device 0 first) and the output layer goes with
    the last device, as in llama.cpp; a device's compute buffer counts once it holds a layer. For a
    target share t the greedy fill (each device takes as many blocks as fit under t x usable) is
    feasible exactly when some contiguous split is, so a bisection on t finds the best split.
    """
    devices = hw.devices
    if len(devices) < 2:
        return None
    n = spec.n_layers
    ngl = n + 1 if st.gpu_layers is None else min(st.gpu_layers, n + 1)
    if ngl < 1:
        return None
    kv = kv or kv_cache(spec, st)
    gpu_blocks, first = ngl - 1, n - (ngl - 1)
    moved = [w.experts_per_layer[i] if i < st.cpu_moe_layers and w.experts_per_layer else 0 for i in range(n)]
    cost = [w.per_layer[i] - moved[i] + kv.per_layer[i] for i in range(first, n)]
    output = head_bytes(spec, w)
    buf = buffers.llama_cpp_compute_bytes(spec, st, kv.cells_full, output_here=False)
    buf_out = buffers.llama_cpp_compute_bytes(spec, st, kv.cells_full, output_here=True) + output
    usable = [engine_usable_bytes(hw, d, st, now=now) for d in devices]

    def fill(t: float) -> tuple[int, ...] | None:
        counts, j = [], 0
        for d in range(len(devices) - 1):
            cap, used, c = t * usable[d], buf, 0
            while j < gpu_blocks and used + cost[j] <= cap:
                used, j, c = used + cost[j], j + 1, c + 1
            counts.append(c)
        if sum(cost[j:]) + buf_out > t * usable[-1]:
            return None
        return (*counts, gpu_blocks - j + 1)

    if fill(1.0) is None:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(30):
        mid = (lo + hi) / 2
        if fill(mid) is None:
            lo = mid
        else:
            hi = mid
    return fill(hi)


def _layered(spec: ModelSpec, w: WeightBytes, st: RunSettings, hw: Hardware, now: bool, kv: KvCache, *,
             staging: int = 0) -> MemoryBreakdown:
    """llama.cpp/Ollama/MLX placement; `staging` is the first GPU's op-offload copy buffer under --n-cpu-moe
    (buffers.llama_cpp_offload_staging_bytes: ggml runs RAM-resident expert matmuls on backend 0)."""
    n = spec.n_layers
    devices = hw.devices
    ngl = n + 1 if st.gpu_layers is None else min(st.gpu_layers, n + 1)
    if not devices:
        ngl = 0
    gpu_blocks = max(0, ngl - 1)
    first_gpu_block = n - gpu_blocks
    output_on_gpu = ngl >= 1
    mlx = st.engine == "mlx"
    notes: list[str] = []
    host_w = w.token_embd if not mlx else 0
    if mlx:
        output_on_gpu, gpu_blocks, first_gpu_block, ngl = True, n, 0, n + 1
    # the input copy of a tied token_embd stays in host RAM; MLX holds the one shared matrix
    output_bytes = w.output if mlx else head_bytes(spec, w)
    usable = [engine_usable_bytes(hw, d, st, now=now) for d in devices]
    shares = list(st.tensor_split) if st.tensor_split and len(st.tensor_split) == len(devices) and not mlx else usable
    placed = layer_devices(ngl, shares) if devices else []
    output_dev = placed[-1] if output_on_gpu and placed else None
    # --n-cpu-moe N: the routed experts of blocks 0..N-1 stay in host RAM wherever the block runs
    moved = [w.experts_per_layer[i] if i < st.cpu_moe_layers and w.experts_per_layer else 0 for i in range(n)]
    per_device: list[DeviceUsage] = []
    for idx, dev in enumerate(devices):
        blocks = [first_gpu_block + j for j in range(gpu_blocks) if placed[j] == idx]
        here = idx == output_dev
        dw = sum(w.per_layer[i] - moved[i] for i in blocks) + (output_bytes if here else 0)
        if mlx and idx == 0:
            dw += w.token_embd
        dkv = sum(kv.per_layer[i] for i in blocks)
        holds = bool(blocks) or here
        dbuf = buffers.llama_cpp_compute_bytes(spec, st, kv.cells_full, output_here=here) if holds else 0
        if idx == 0 and any(moved):
            dbuf += staging
        per_device.append(DeviceUsage(
            name=dev.name, weights_bytes=dw, kv_cache_bytes=dkv, buffers_bytes=dbuf, total_bytes=dw + dkv + dbuf,
            usable_bytes=usable[idx], layers=len(blocks)))
    host_w += sum(w.per_layer[:first_gpu_block]) + sum(moved[first_gpu_block:]) + (0 if output_on_gpu else w.output)
    if spec.tied_embeddings and output_on_gpu and devices and not mlx:
        notes.append(msg("tied embeddings: llama.cpp keeps the input copy in RAM and a duplicate on the GPU as output"))
    host_kv = sum(kv.per_layer[:first_gpu_block])
    host_buf = buffers.llama_cpp_output_bytes(spec, st)
    if not devices or gpu_blocks < n:
        host_buf += buffers.llama_cpp_compute_bytes(spec, st, kv.cells_full, output_here=not output_on_gpu)
    if devices and gpu_blocks < n:
        notes.append(msg("partial offload: %(gpu)s of %(n)s layers on GPU, %(ram)s in system RAM", gpu=gpu_blocks, n=n,
                         ram=n - gpu_blocks))
    if devices and st.cpu_moe_layers and any(moved):
        notes.append(msg("expert offload: the routed experts of the first %(k)s blocks in system RAM",
                         k=st.cpu_moe_layers))
    if spec.vision_params:
        notes.append(msg("vision tower not counted: llama.cpp loads it from a separate mmproj file"))
    return _breakdown(per_device, w, kv, host_w, host_kv, host_buf, gpu_blocks, n, notes)


def _paged(spec: ModelSpec, w: WeightBytes, st: RunSettings, hw: Hardware, now: bool,
           kv: KvCache | None = None) -> MemoryBreakdown:
    devices = hw.devices
    tp = max(1, len(devices))
    notes: list[str] = []  # filled below
    ref = devices[0] if devices else None
    ref_total = driver_total_bytes(ref) if ref else 0
    batched, seqs = buffers.vllm_batch_defaults(ref_total, ref.name if ref else "")
    kv = kv or kv_cache(spec, st, tensor_parallel=tp, max_num_batched_tokens=batched)
    weights_all = w.total + w.vision  # vLLM/SGLang load the vision tower with the model
    pad = buffers.vllm_mxfp4_pad_factor(spec, tp)
    if pad > 1 and st.engine == "vllm":
        weights_all += int(sum(w.experts_per_layer) * (pad - 1))
        notes.append(msg("MXFP4 experts padded by vLLM's MoE kernels: +%(share)s expert memory",
                         share=Num(pad - 1, ".1%")))
    if spec.vision_params:
        notes.append(msg("vision tower counted in bf16: vLLM/SGLang load it with the language model"))
    act = (buffers.vllm_activation_bytes(spec, tp, batched, seqs)
           + buffers.vllm_overhead_bytes(tp, ref_total, nvlink=all(d.nvlink for d in devices)))
    per_device = []
    for dev in devices:
        usable = engine_usable_bytes(hw, dev, st, now=now)
        if st.engine == "sglang":
            total = driver_total_bytes(dev)
            usable = min(usable, total - buffers.sglang_reserved_bytes(total, tp))
            dbuf = 0  # SGLang keeps activations and graphs outside mem_fraction_static
        else:
            dbuf = act
        dw, dkv = weights_all // tp, kv.total // tp
        per_device.append(DeviceUsage(
            name=dev.name, weights_bytes=dw, kv_cache_bytes=dkv, buffers_bytes=dbuf, total_bytes=dw + dkv + dbuf,
            usable_bytes=usable, layers=spec.n_layers))
    if not devices:
        notes.append(msg("%(engine)s needs a GPU: sized as if everything ran from system RAM", engine=st.engine))
        return _breakdown([], w, kv, weights_all, kv.total, act, 0, spec.n_layers, notes)
    return _breakdown(per_device, w, kv, 0, 0, 0, spec.n_layers, spec.n_layers, notes)


def _breakdown(per_device, w, kv, host_w, host_kv, host_buf, gpu_layers, n, notes) -> MemoryBreakdown:
    weights = sum(d.weights_bytes for d in per_device)
    kv_b = sum(d.kv_cache_bytes for d in per_device)
    buf = sum(d.buffers_bytes for d in per_device)
    return MemoryBreakdown(
        weights_bytes=weights, kv_cache_bytes=kv_b, buffers_bytes=buf, total_bytes=weights + kv_b + buf,
        host_weights_bytes=host_w, host_kv_cache_bytes=host_kv, host_buffers_bytes=host_buf,
        model_file_bytes=w.total + w.file_only, gpu_layers=gpu_layers, n_layers=n, per_device=per_device, kv=kv, notes=notes,
    )
