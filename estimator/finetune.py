"""Fine-tuning memory: QLoRA, LoRA and full fine-tuning (FORMULAS.md §5).

Weights: QLoRA stores the linear layers in NF4 with double-quantized scales, 4.127 bits/param
(QLoRA paper), embeddings, output head and norms in bf16; LoRA keeps the whole base in bf16;
full fine-tuning holds bf16 working + fp32 master weights (6 B/param, HF accounting).
Gradients + optimizer: full FT 4 B/param fp32 gradients + AdamW 8 B (8-bit AdamW 2 B, SGD with
momentum 4 B); (Q)LoRA only for the adapters, r·(d_in + d_out) per adapted matrix, which live
in fp32 (4 B weights + 4 B gradients + optimizer). Activations (Korthikanti et al. 2022, flash
attention so no s² term): 34·s·b·h bytes per layer, or with gradient checkpointing 2·s·b·h per
layer kept + one layer recomputed; plus fp32 logits and their gradient, 8·b·s·V, unless a fused
cross-entropy (Unsloth, Liger) avoids them.
"""
from __future__ import annotations

from math import ceil
from typing import Literal

from fitprobe.estimator.fields import doc, record
from fitprobe.estimator.message import msg

from .spec import ModelSpec

NF4_DQ_BPW = 4 + 8 / 64 + 32 / (64 * 256)  # 4.127 bits: NF4 + 8-bit absmax per 64 + fp32 per 256 blocks
OPTIMIZER_BYTES = {"adamw": 8.0, "adamw8bit": 2.0, "sgd": 4.0}  # per trainable param (HF model_memory_anatomy)


@record
class FinetuneOptions:
    seq_len: int = doc(default=2048, gt=0)
    micro_batch: int = doc(default=1, gt=0)
    gradient_checkpointing: bool = True
    lora_rank: int = doc(default=16, gt=0)
    optimizer: Literal["adamw", "adamw8bit", "sgd"] = "adamw"
    fused_loss: bool = doc(default=False, description="fused/chunked cross-entropy: no full fp32 logits")

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZER_BYTES:
            raise ValueError(f"unknown optimizer '{self.optimizer}' (choose from: {', '.join(OPTIMIZER_BYTES)})")


@record
class FinetuneMethod:
    method: Literal["qlora", "lora", "full"]
    label: str
    weights_bytes: int
    grads_optimizer_bytes: int
    activations_bytes: int
    total_bytes: int
    trainable_params: int
    fits: bool | None = doc(default=None, description="on the plan's hardware (one device, or sharded over all)")
    devices_needed: int | None = doc(default=None, description="devices of the plan's type, states sharded (FSDP/ZeRO-3)")
    smallest_gpu: str | None = doc(default=None, description="smallest catalog device that holds it alone")


@record
class Finetune:
    options: FinetuneOptions
    methods: list[FinetuneMethod]


def param_groups(spec: ModelSpec) -> tuple[int, int, int]:
    """(linear params NF4 would quantize, everything else in the text model, LoRA adapter params per rank)."""
    from .tensors import inventory

    linear = other = adapter_dims = 0
    for t in inventory(spec):
        if t.vision or t.mtp:
            continue
        if t.quantizable and t.name not in ("token_embd.weight", "output.weight"):
            linear += t.n
            if t.layer is not None and not t.expert and len(t.shape) == 2:
                adapter_dims += t.shape[0] + t.shape[1]
        else:
            other += t.n
    return linear, other, adapter_dims


def activation_bytes(spec: ModelSpec, o: FinetuneOptions) -> int:
    s, b, h, L = o.seq_len, o.micro_batch, spec.hidden_size, spec.n_layers
    per_layer = 34 * s * b * h
    act = L * 2 * s * b * h + per_layer if o.gradient_checkpointing else L * per_layer
    if not o.fused_loss:
        act += 8 * b * s * spec.vocab_size
    return int(act)


def finetune_memory(spec: ModelSpec, o: FinetuneOptions) -> list[FinetuneMethod]:
    linear, other, dims = param_groups(spec)
    total = linear + other
    act = activation_bytes(spec, o)
    opt = OPTIMIZER_BYTES[o.optimizer]
    adapters = o.lora_rank * dims
    rows = [
        ("qlora", msg("QLoRA (4-bit NF4 base)"), int(linear * NF4_DQ_BPW / 8 + other * 2), int(adapters * (8 + opt)),
         adapters),
        ("lora", msg("LoRA (16-bit base)"), total * 2, int(adapters * (8 + opt)), adapters),
        ("full", msg("Full fine-tune (%(optimizer)s, mixed precision)", optimizer=o.optimizer), total * 6,
         int(total * (4 + opt)), total),
    ]
    return [FinetuneMethod(method=m, label=lab, weights_bytes=w, grads_optimizer_bytes=g, activations_bytes=act,
                           total_bytes=w + g + act, trainable_params=n) for m, lab, w, g, n in rows]


def devices_needed(m: FinetuneMethod, usable_bytes: int, limit: int = 64) -> int | None:
    """Fewest devices when weights, gradients and optimizer states shard and activations do not."""
    room = usable_bytes - m.activations_bytes
    if room <= 0:
        return None
    n = max(1, ceil((m.weights_bytes + m.grads_optimizer_bytes) / room))
    return n if n <= limit else None
