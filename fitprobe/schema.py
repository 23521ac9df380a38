"""The JSON contract: one record tree (`PlanOutput`) for `plan`, `check` and `report --json`.

Documented field by field in docs/json-contract.md; `fitprobe schema` prints its JSON Schema.
Bytes are integers; ratios are fractions (0.83 = 83 %). Bump SCHEMA_VERSION on any breaking change.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from fitprobe.estimator.fields import doc, record
from fitprobe.estimator.launch.common import LaunchPlan
from fitprobe.estimator.llama_rules import LLAMA_CPP_BUILD
from fitprobe.estimator.memory import DeviceUsage
from fitprobe.estimator.plan import MatrixRow, ScalingRow
from fitprobe.estimator.speed import Speed

if TYPE_CHECKING:  # sections only some commands fill: imported when the contract is validated
    from fitprobe.estimator.cost import Cost
    from fitprobe.estimator.diagnosis import Diagnosis
    from fitprobe.estimator.finetune import Finetune
    from fitprobe.estimator.fixes import Fix
    from fitprobe.estimator.gate import GateResult
    from fitprobe.estimator.recommend import Pick
    from fitprobe.verify import VerifyResult

SCHEMA_VERSION = "2.1"  # 2.1: gate.on (idle | now); with --json an error is {"error": {code, kind, message}}


@record
class ModelInfo:
    id: str = doc(description="catalog name, HF id or file the model was resolved from")
    hf_id: str | None = doc(default=None, description="Hugging Face repo id of the checkpoint, when known")
    source: str = doc(description="bundled catalog, Hugging Face Hub, HF cache, local file")
    architecture: str = doc(description="config.json model_type of the language model")
    params_total: int = doc(description="parameters in the checkpoint: language model + vision tower + MTP layers")
    params_text: int = doc(description="parameters of the language model an engine loads for decoding")
    params_active: int = doc(description="parameters touched per token (routed experts counted k/E)")
    params_vision: int = doc(default=0, description="vision tower parameters (counted in params_total)")
    n_layers: int = doc(description="decoder blocks (num_hidden_layers)")
    max_context: int = doc(description="max_position_embeddings of the config")
    attention: str = doc(description="attention layout: full / sliding / chunked / MLA / linear / Mamba counts")
    published_params: int | None = doc(default=None, description="the publisher's stated size (bundled catalog)")


@record
class SettingsInfo:
    quant: str = doc(description="quantization format sized (catalogs/data/quant_formats.json)")
    context: int = doc(description="tokens per sequence")
    kv_cache_dtype: str = doc(description="f16, bf16, fp8, q8_0, q4_0 or auto (the model's dtype)")
    batch: int = doc(description="concurrent sequences, each with the full context")
    engine: str = doc(description="llama.cpp, vllm, sglang, ollama or mlx: whose allocator was modelled")
    ubatch: int = doc(description="llama.cpp micro-batch the compute buffer is sized for")
    flash_attention: bool = doc(description="llama.cpp flash attention (without it the compute buffer grows with context)")
    kv_unified: bool = doc(default=False, description="llama.cpp --kv-unified: one KV stream shared by all sequences")
    gpu_layers: int | None = doc(description="llama.cpp -ngl (counts the output layer); null = all")
    gpu_memory_utilization: float = doc(description="vLLM's share of each GPU")
    cpu_moe_layers: int = doc(default=0, description="llama.cpp --n-cpu-moe: routed experts of blocks 0..N-1 in RAM")
    tensor_split: list[int] | None = doc(default=None, description="llama.cpp --tensor-split as layers per device "
                                                                   "(the last counts the output layer); null = default")


@record
class DeviceInfo:
    name: str
    memory_bytes: int = doc(description="physical memory")
    driver_total_bytes: int | None = doc(
        default=None, description="the total CUDA reports (physical minus the driver's reserve; probed, or the GPU "
                                  "catalog's nvidia-smi figure): vLLM and SGLang size their share on it")
    usable_bytes: int = doc(description="what the model may use: usable share, hard caps, engine share")
    free_bytes: int | None = doc(default=None, description="free right now (probed devices)")
    bandwidth_gbs: float | None = doc(default=None, description="memory bandwidth, GB/s (catalog or derived from the probe)")
    catalog_key: str | None = doc(default=None, description="matching entry of catalogs/data/gpus.json")
    readings: dict[str, Any] = doc(default_factory=dict, description="probed readings with their sources")


@record
class HardwareInfo:
    name: str = doc(description="'2x RTX 4090', 'RTX 3090 + RTX 4090', 'CPU only'")
    count: int = doc(description="number of accelerators (0 = CPU only)")
    memory_bytes: int = doc(description="physical accelerator memory, all devices")
    usable_bytes: int = doc(description="memory the model may use, all devices (usable share, caps, engine share)")
    usable_fraction: float = doc(description="share of physical memory treated as usable (--usable)")
    system_ram_bytes: int | None = doc(default=None, description="host RAM for offload (probed, cgroup-capped, or --ram-gib)")
    source: str = doc(description="'catalog' (named with --gpu) or 'probe'")
    devices: list[DeviceInfo] = doc(default_factory=list)


@record
class MemoryInfo:
    weights_bytes: int = doc(description="weights on the accelerators")
    kv_cache_bytes: int = doc(description="KV cache and recurrent state on the accelerators")
    buffers_bytes: int = doc(description="compute buffers / activation peak / engine overhead on the accelerators")
    total_bytes: int
    host_weights_bytes: int = doc(description="weights in system RAM (llama.cpp input embedding, offloaded layers)")
    host_kv_cache_bytes: int
    host_buffers_bytes: int
    model_file_bytes: int = doc(description="all language-model weights at this quant (GGUF file / checkpoint size)")
    weights_source: str = doc(description="formula, real file size, exact from checkpoint / GGUF header")
    gpu_layers: int = doc(description="decoder blocks on accelerators")
    kv_detail: dict[str, int] = doc(description="KV split: full, windowed, latent, indexer, recurrent; cells")
    per_device: list[DeviceUsage] = doc(description="the split over devices (layers, weights, KV, buffers, usable)")


Status = Literal["fits", "tight", "exceeds"]


@record
class Deployment:
    """The deployment fitprobe recommends: exactly what `command` runs, and how it differs from the request."""

    engine: str = doc(description="llama.cpp, vllm, sglang, ollama or mlx")
    quant: str = doc(description="the format the command loads")
    context: int = doc(description="tokens per sequence the command serves")
    kv_cache_dtype: str
    batch: int = doc(description="concurrent sequences")
    gpu_layers: int | None = doc(default=None, description="llama.cpp -ngl (counts the output layer)")
    cpu_moe_layers: int = doc(default=0, description="llama.cpp --n-cpu-moe: blocks whose routed experts stay in RAM")
    tensor_split: list[int] | None = doc(default=None, description="layers per device (llama.cpp --tensor-split)")
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    nodes: int = 1
    status: Status = doc(description="the verdict of this deployment (same as `verdict.status`)")
    margin_bytes: int = doc(description="usable minus required on the tightest device (or system RAM)")
    total_bytes: int = doc(description="memory on the accelerators")
    host_bytes: int = doc(description="memory in system RAM")
    max_context: int | None = doc(default=None, description="the longest context this deployment fits, up to the "
                                                            "model's maximum (null when it does not fit)")
    decode_tps: float | None = doc(default=None, description="decode tokens/s per sequence of this command")
    prefill_tps: float | None = doc(default=None, description="prefill tokens/s of this command")
    command: str = doc(description="the command(s) to run, setup first, one per line")
    changes: list[str] = doc(default_factory=list, description="what differs from the request, in words; empty when "
                                                              "the request runs as asked")


@record
class VerdictInfo:
    status: Status = doc(description="fits | tight | exceeds")
    margin_bytes: int = doc(description="usable minus required on the limiting device (negative = short)")
    utilization: float = doc(description="required / usable on the limiting device")
    reason: str = doc(description="one sentence: what decides the verdict")
    limiting: str = doc(description="the device (or 'system RAM') with the smallest relative margin")
    error_band: float = doc(description="measured p90 |error| of the dominant components (weights, KV cache), "
                                        "on the runs of the plan's engine family (llama.cpp GGUF or vLLM checkpoints); "
                                        "its weights' share compounded with weights_spread for a format sized "
                                        "approximately")
    uncertainty_bytes: int = doc(
        default=0, description="this plan's error band on the limiting device: each component's bytes times its "
                               "measured p90 error (catalogs/data/error_band.json); a smaller margin is 'tight'")
    weights_spread: float = doc(
        default=0.0, ge=0, description="a format sized approximately: how much larger its worst published file is "
                                       "than the formula (catalogs/data/quant_spread.json), compounded onto the "
                                       "weights' error; 0 when the format is sized exactly")
    band_note: str = doc(default="", description="why the band is wider than the measured one (a format sized "
                                                 "approximately, and the published file that sets it); empty if not")


@record
class AskedInfo:
    """The request exactly as asked, when the recommended deployment differs from it."""

    settings: SettingsInfo
    verdict: VerdictInfo = doc(description="fit of the settings as asked (on the idle hardware)")
    total_bytes: int = doc(description="accelerator memory the settings as asked need")
    host_bytes: int = doc(description="system RAM the settings as asked need")


@record
class PlanOutput:
    schema_version: str = SCHEMA_VERSION
    llama_cpp_build: int = doc(default=LLAMA_CPP_BUILD, description="the llama.cpp build (release tag bNNNN) whose "
                                                                    "source and output fitprobe's llama.cpp rules were "
                                                                    "checked against (docs/llama-cpp.md)")
    command: str = doc(description="plan, check or report")
    model: ModelInfo
    recommended: Deployment = doc(description="the answer: the deployment fitprobe recommends (settings, verdict, "
                                              "memory and speed below all describe it) and its command")
    settings: SettingsInfo = doc(description="the recommended deployment's settings")
    hardware: HardwareInfo
    memory: MemoryInfo = doc(description="the recommended deployment's memory, per device")
    verdict: VerdictInfo = doc(description="the recommended deployment's fit on the idle hardware (total memory)")
    asked: AskedInfo | None = doc(default=None, description="the request as asked and its verdict, when the "
                                                            "recommended deployment differs from it")
    verdict_now: VerdictInfo | None = doc(
        default=None, description="check only: fit right now, against free memory (other processes counted)")
    recommended_now: Deployment | None = doc(
        default=None, description="check only: when the recommended command does not fit in the memory free right "
                                  "now, the deployment that does (planned on free memory and available RAM)")
    matrix: list[MatrixRow] = doc(description="every quantization format at the context asked")
    scaling: list[ScalingRow] = doc(description="4K..128K and the model's maximum context at the quant asked")
    notes: list[str] = doc(default_factory=list, description="what was probed, assumed or approximated")
    launch: dict[str, LaunchPlan] = doc(
        default_factory=dict, description="per engine shown (llama.cpp, ollama, vllm, sglang, mlx): the command, "
                                          "each flag with its reason, and whether that configuration fits")
    fixes: list[Fix] = doc(default_factory=list,
                             description="when it does not fit: the smallest change on each axis, best first")
    gate: GateResult | None = doc(default=None, description="requirements (--require-*, --min-margin, --strict) "
                                                              "and which of them hold; exit code 1 when one fails")
    verify: VerifyResult | None = doc(default=None, description="--verify: llama.cpp's own fitter beside fitprobe's")
    speed: Speed | None = doc(default=None, description="the recommended deployment's decode / prefill tokens/s and "
                                                          "4K-prompt TTFT (bandwidth and compute model, calibrated per backend)")
    cost: Cost | None = doc(default=None, description="report: cloud cost per 1M output tokens, rent vs buy")
    finetune: Finetune | None = doc(default=None, description="report: QLoRA / LoRA / full fine-tuning memory")
    recommendations: list[Pick] = doc(default_factory=list, description="report: hardware picks that fit")
    diagnosis: Diagnosis | None = doc(default=None, description="report: what blocks the fit, KV cost 8K→32K")


def bind_section_types() -> None:
    """Import the record types of the optional sections, so pydantic can resolve every annotation.

    Only the JSON Schema needs them (the JSON writer resolves a section's type from its value); importing
    them only here keeps a plan's start-up short."""
    from fitprobe.estimator.cost import Cost
    from fitprobe.estimator.diagnosis import Diagnosis
    from fitprobe.estimator.finetune import Finetune
    from fitprobe.estimator.fixes import Fix
    from fitprobe.estimator.gate import GateResult
    from fitprobe.estimator.recommend import Pick
    from fitprobe.verify import VerifyResult

    globals().update(Cost=Cost, Diagnosis=Diagnosis, Finetune=Finetune, Fix=Fix, GateResult=GateResult,
                     Pick=Pick, VerifyResult=VerifyResult)
