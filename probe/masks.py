"""Visible-device masks. NVML, nvidia-smi and rocm-smi list every GPU whatever the environment
says, so the probe applies the masks itself: a GPU hidden from this process is not counted.

CUDA_VISIBLE_DEVICES: unset = all, empty = none; indices, GPU UUIDs (unique prefixes allowed) or
MIG UUIDs; parsing stops at the first invalid entry ('0,2,-1,1' exposes 0 and 2). ROCm:
ROCR_VISIBLE_DEVICES (indices or UUIDs) then HIP_VISIBLE_DEVICES (indices) on what is left,
each renumbering from 0 (PROBING.md §1.7, §2.5).
"""
from __future__ import annotations

import re
from typing import Mapping

from fitprobe.estimator.message import msg

from .types import GpuReading

MASK_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
)
_TOKEN = re.compile(r"^(\d+|GPU-[0-9A-Za-z-]+|MIG-[0-9A-Za-z/-]+)$")


def parse_mask(value: str | None) -> list[str] | None:
    """None = no mask (all visible); [] = nothing visible; else the valid leading tokens."""
    if value is None:
        return None
    tokens = []
    for raw in value.split(","):
        tok = raw.strip()
        if not _TOKEN.match(tok):
            break
        tokens.append(tok)
    return tokens


def _hide(g: GpuReading, var: str) -> None:
    if g.visible:
        g.visible = False
        g.hidden_reason = msg("hidden by %(var)s", var=var)


def _select(gpus: list[GpuReading], tokens: list[str], var: str) -> list[GpuReading]:
    """Keep the GPUs the tokens name (in token order, the order the runtime renumbers them)."""
    chosen: list[GpuReading] = []
    for tok in tokens:
        hit = None
        if tok.isdigit():
            i = int(tok)
            hit = gpus[i] if i < len(gpus) else None
        elif tok.startswith("GPU-"):
            matches = [g for g in gpus if g.uuid and g.uuid.lower().startswith(tok.lower())]
            hit = matches[0] if len(matches) == 1 else None
        if hit is not None and hit not in chosen:
            chosen.append(hit)
    for g in gpus:
        if g not in chosen:
            _hide(g, var)
    return chosen


def _apply_cuda(nvidia: list[GpuReading], tokens: list[str]) -> None:
    """MIG tokens keep the parent GPU with only the named slice; other tokens select whole GPUs."""
    mig_tokens = [t for t in tokens if t.startswith("MIG-")]
    plain = [t for t in tokens if not t.startswith("MIG-")]
    keep_mig: dict[int, list] = {}
    for tok in mig_tokens:
        for g in nvidia:
            for inst in g.mig_instances:
                parent = f"MIG-{g.uuid}/{inst.gpu_instance_id}/{inst.compute_instance_id}" if g.uuid else None
                if (inst.uuid and inst.uuid.lower() == tok.lower()) or (parent and parent.lower() == tok.lower()):
                    keep_mig.setdefault(id(g), []).append(inst)
    chosen = _select(nvidia, plain, "CUDA_VISIBLE_DEVICES") if plain else []
    for g in nvidia:
        if id(g) in keep_mig:
            g.visible, g.hidden_reason = True, None
            g.mig_instances = keep_mig[id(g)]
            g.notes.append(msg("only the MIG slice named in CUDA_VISIBLE_DEVICES is visible"))
        elif g not in chosen:
            _hide(g, "CUDA_VISIBLE_DEVICES")


def apply_masks(gpus: list[GpuReading], env: Mapping[str, str]) -> list[str]:
    """Mark hidden GPUs (visible=False, hidden_reason) in place; return notes for the report."""
    notes: list[str] = []
    nvidia = sorted((g for g in gpus if g.vendor == "nvidia"), key=lambda g: g.index)
    amd = sorted((g for g in gpus if g.vendor == "amd"), key=lambda g: g.index)

    cuda = parse_mask(env.get("CUDA_VISIBLE_DEVICES"))
    if cuda is not None and nvidia:
        _apply_cuda(nvidia, cuda)
        names = {g.name for g in nvidia}
        if any(t.isdigit() for t in cuda) and len(names) > 1 and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            notes.append(
                "CUDA_VISIBLE_DEVICES uses indices on mixed GPUs without CUDA_DEVICE_ORDER=PCI_BUS_ID: "
                "CUDA numbers fastest-first, NVML in PCI order, so the probe may pick the wrong card"
            )
    if amd:
        left = amd
        rocr = parse_mask(env.get("ROCR_VISIBLE_DEVICES"))
        if rocr is not None:
            left = _select(left, rocr, "ROCR_VISIBLE_DEVICES")
        hip = parse_mask(env.get("HIP_VISIBLE_DEVICES"))
        if hip is None and not nvidia:
            hip = parse_mask(env.get("CUDA_VISIBLE_DEVICES"))  # HIP honours it too
        if hip is not None:
            _select(left, [t for t in hip if t.isdigit()], "HIP_VISIBLE_DEVICES")
    if env.get("NVIDIA_VISIBLE_DEVICES") is not None and not nvidia:
        notes.append(msg("NVIDIA_VISIBLE_DEVICES=%(value)s but no NVIDIA GPU is visible",
                         value=env["NVIDIA_VISIBLE_DEVICES"]))
    return notes


def active_masks(env: Mapping[str, str]) -> dict[str, str]:
    return {k: env[k] for k in MASK_VARS if k in env}
