"""AMD GPUs: amdsmi (Python) → rocm-smi --json → sysfs (no ROCm needed).

APUs (Strix Halo and smaller) keep GPU memory in system RAM: a BIOS VRAM carve-out plus GTT.
Both pools are reported; their sum is capped by host RAM because neither alone is safe
(PROBING.md §2.4: HIP reported free > total on a 512 MB carve-out box).
"""
from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Callable

from fitprobe.estimator.message import Num, join, msg

from .run import RunResult, find_program, run_command
from .types import GiB, MiB, BackendStatus, GpuReading

IGPU_VRAM_MAX = 2 * GiB  # rocm-smi path: llmfit treats <= 2 GB "VRAM" cards as iGPUs


def is_integrated(vram_total: int | None, gtt_total: int | None) -> bool:
    """Ollama's sysfs rule: small carve-out (<= 4 GiB) with a large GTT (>= 8 GiB, >= 4x VRAM) is an APU."""
    if not vram_total or not gtt_total:
        return False
    return vram_total <= 4 * GiB and gtt_total >= 8 * GiB and gtt_total >= 4 * vram_total


def apply_apu_pools(r: GpuReading, host_ram_total: int | None) -> None:
    """APU: usable GPU memory = carve-out + GTT, capped by carve-out + host RAM (GTT lives in it)."""
    if not r.integrated:
        return
    r.unified_memory = True
    vram = r.memory_total_bytes or 0
    gtt = r.gtt_total_bytes or 0
    if host_ram_total:
        gtt = min(gtt, host_ram_total)
    if gtt:
        r.usable_cap_bytes = vram + gtt
        r.memory_total_bytes = vram + gtt
        r.memory_free_bytes = None  # per-pool 'used' does not say what other programs hold in RAM
        r.notes.append(
            msg("APU: %(vram)s carve-out + %(gtt)s GTT (system RAM), counted once", vram=Num(vram / GiB, ".2f", "GiB"),
                gtt=Num(gtt / GiB, ".2f", "GiB"))
        )


# ---- rocm-smi -------------------------------------------------------------------------------------

def _size(key: str, value: str) -> int | None:
    """rocm-smi sizes: '(B)' bytes; the Hygon DCU fork prints '(MiB)'."""
    try:
        n = float(value)
    except (TypeError, ValueError):
        return None
    return int(n * MiB) if "(MiB)" in key else int(n)


def _product(d: dict[str, str]) -> str:
    for key in ("Card Series", "Device Name", "Card Model", "Card SKU"):
        v = (d.get(key) or "").strip()
        if v and v.upper() != "N/A":
            return v
    return "AMD GPU"


def _card_reading(card: str, d: dict[str, str], position: int) -> GpuReading:
    total = used = None
    for key, value in d.items():
        k = key.lower()
        if k.startswith("vram total memory"):
            total = _size(key, value)
        elif k.startswith("vram total used memory"):
            used = _size(key, value)
    m = re.search(r"(\d+)$", card)
    gfx = (d.get("GFX Version") or "").strip() or None
    r = GpuReading(
        index=int(m.group(1)) if m else position,
        name=_product(d),
        vendor="amd",
        uuid=(d.get("Unique ID") or "").strip() or None,
        memory_total_bytes=total,
        memory_used_bytes=used,
        memory_free_bytes=(total - used) if total is not None and used is not None else None,
        compute_capability=gfx if gfx and gfx.upper() != "N/A" else None,
        source="rocm-smi",
    )
    if r.uuid and r.uuid.upper() == "N/A":
        r.uuid = None
    if _product(d) == "AMD GPU":
        r.notes.append(msg("rocm-smi gave no product name (Card Series N/A: libdrm missing?)"))
    if total is not None and total <= IGPU_VRAM_MAX:
        r.integrated = True
        r.notes.append(msg("small 'VRAM' carve-out: integrated GPU sharing system RAM"))
    return r


def parse_rocm_smi_json(text: str) -> list[GpuReading]:
    """`rocm-smi --showproductname --showmeminfo vram --json`: {'card0': {...}, ...}. Warnings
    printed before the JSON are skipped."""
    start = text.find("{")
    if start < 0:
        return []
    data = json.loads(text[start:])
    return [
        _card_reading(card, fields, i)
        for i, (card, fields) in enumerate(data.items())
        if card.lower().startswith("card") and isinstance(fields, dict)
    ]


def parse_rocm_smi_csv(text: str) -> list[GpuReading]:
    """The same with `--csv`: a 'device' column holding card0, card1, ..."""
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(text.strip())))
    return [_card_reading(row.get("device") or f"card{i}", row, i) for i, row in enumerate(rows)]


# ---- sysfs ---------------------------------------------------------------------------------------

def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip(), 0)
    except (OSError, ValueError):
        return None


def drm_cards(sys_root: Path, vendor_id: str) -> list[tuple[str, Path]]:
    """(cardN, device dir) for DRM cards of one PCI vendor; connector entries (card1-DP-1) skipped."""
    base = sys_root / "class" / "drm"
    out = []
    try:
        entries = sorted(base.iterdir(), key=lambda p: int(re.sub(r"\D", "", p.name) or 0))
    except OSError:
        return []
    for entry in entries:
        if not re.fullmatch(r"card\d+", entry.name):
            continue
        dev = entry / "device"
        try:
            vendor = (dev / "vendor").read_text().strip().lower()
        except OSError:
            continue
        if vendor == vendor_id:
            out.append((entry.name, dev))
    return out


def _pci_slot(dev: Path) -> str | None:
    try:
        for line in (dev / "uevent").read_text().splitlines():
            if line.startswith("PCI_SLOT_NAME="):
                return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


def read_sysfs(sys_root: Path) -> list[GpuReading]:
    """amdgpu's mem_info_* files (bytes, kernel >= 5.4.87/5.10.5)."""
    out = []
    for pos, (card, dev) in enumerate(drm_cards(sys_root, "0x1002")):
        vram = _read_int(dev / "mem_info_vram_total")
        if vram is None:
            continue
        used = _read_int(dev / "mem_info_vram_used")
        gtt = _read_int(dev / "mem_info_gtt_total")
        device_id = (dev / "device").read_text().strip() if (dev / "device").is_file() else None
        name = None
        if (dev / "product_name").is_file():
            name = (dev / "product_name").read_text().strip() or None
        r = GpuReading(
            index=int(card[4:]),
            name=name or f"AMD GPU {device_id or card}",
            vendor="amd",
            pci_bus_id=_pci_slot(dev),
            memory_total_bytes=vram,
            memory_used_bytes=used,
            memory_free_bytes=(vram - used) if used is not None else None,
            gtt_total_bytes=gtt,
            integrated=is_integrated(vram, gtt),
            source="sysfs",
        )
        out.append(r)
    return out


def enrich_from_sysfs(readings: list[GpuReading], sys_root: Path) -> None:
    """rocm-smi's cardN is DRM cardN: add GTT size (and re-judge iGPU) from sysfs when it is there."""
    by_index = {r.index: r for r in read_sysfs(sys_root)}
    for r in readings:
        s = by_index.get(r.index)
        if s is None:
            continue
        r.gtt_total_bytes = s.gtt_total_bytes
        r.pci_bus_id = r.pci_bus_id or s.pci_bus_id
        if s.gtt_total_bytes is not None:
            r.integrated = is_integrated(r.memory_total_bytes, s.gtt_total_bytes)


# ---- amdsmi (Python) -----------------------------------------------------------------------------

def read_amdsmi(am) -> list[GpuReading]:
    """amdsmi: memory totals in bytes via amdsmi_get_gpu_memory_total/usage; VRAM width and max
    bandwidth (GB/s) from amdsmi_get_gpu_vram_info (PROBING.md §2.1)."""
    am.amdsmi_init()
    try:
        out = []
        for i, h in enumerate(am.amdsmi_get_processor_handles()):
            def safe(fn, *args):
                try:
                    return getattr(am, fn)(h, *args)
                except Exception:  # noqa: BLE001 - AmdSmiLibraryException (NOT_SUPPORTED, NO_PERM)
                    return None

            asic = safe("amdsmi_get_gpu_asic_info") or {}
            vram_t = getattr(am, "AmdSmiMemoryType", None)
            total = safe("amdsmi_get_gpu_memory_total", vram_t.VRAM) if vram_t else None
            used = safe("amdsmi_get_gpu_memory_usage", vram_t.VRAM) if vram_t else None
            gtt = safe("amdsmi_get_gpu_memory_total", vram_t.GTT) if vram_t else None
            info = safe("amdsmi_get_gpu_vram_info") or {}
            name = asic.get("market_name")
            gfx = asic.get("target_graphics_version")
            bw = info.get("vram_max_bandwidth")
            r = GpuReading(
                index=i,
                name=name if name and name != "N/A" else "AMD GPU",
                vendor="amd",
                uuid=safe("amdsmi_get_gpu_device_uuid"),
                pci_bus_id=safe("amdsmi_get_gpu_device_bdf"),
                memory_total_bytes=total,
                memory_used_bytes=used,
                memory_free_bytes=(total - used) if total is not None and used is not None else None,
                gtt_total_bytes=gtt,
                compute_capability=str(gfx) if gfx and gfx != "N/A" else None,
                mem_bus_width_bits=info.get("vram_bit_width") or None,
                derived_bandwidth_gbs=float(bw) if isinstance(bw, (int, float)) and 0 < bw < 1e6 else None,
                driver=(safe("amdsmi_get_gpu_driver_info") or {}).get("driver_version"),
                integrated=is_integrated(total, gtt),
                source="amdsmi",
            )
            out.append(r)
        return out
    finally:
        try:
            am.amdsmi_shut_down()
        except Exception:  # noqa: BLE001
            pass


def probe(
    sys_root: Path = Path("/sys"),
    am=None,
    run: Callable[..., RunResult] = run_command,
    which: Callable[..., str | None] = find_program,
) -> tuple[list[GpuReading], BackendStatus]:
    """amdsmi → rocm-smi → sysfs; the first that lists devices wins. Never raises."""
    reasons = []
    try:
        if am is None:
            # Without ROCm the import prints to stdout and raises KeyError: keep --json output clean.
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                import amdsmi as am  # noqa: PLC0415
        readings = read_amdsmi(am)
        if readings:
            return readings, BackendStatus(name="amd", present=True, devices=len(readings), reason=msg("via amdsmi"))
        reasons.append(msg("amdsmi: no devices"))
    except Exception as exc:  # noqa: BLE001
        reasons.append(msg("amdsmi unavailable (%(error)s)", error=type(exc).__name__))
    exe = which("rocm-smi")
    if exe:
        res = run([exe, "--showproductname", "--showmeminfo", "vram", "--json"])
        try:
            readings = parse_rocm_smi_json(res.stdout) if res.stdout else []
        except ValueError:
            readings = []
        if readings:
            enrich_from_sysfs(readings, sys_root)
            return readings, BackendStatus(name="amd", present=True, devices=len(readings), reason=msg("via rocm-smi"))
        reasons.append(msg("rocm-smi: %(reason)s", reason=res.reason or msg("no JSON devices")))
        if res.broken and not read_sysfs(sys_root):
            return [], BackendStatus(name="amd", present=False, reason=join(reasons), failed=True)
    else:
        reasons.append(msg("rocm-smi not found"))
    readings = read_sysfs(sys_root)
    if readings:
        return readings, BackendStatus(name="amd", present=True, devices=len(readings), reason=msg("via sysfs"))
    reasons.append(msg("no amdgpu device in sysfs"))
    return [], BackendStatus(name="amd", present=False, reason=join(reasons))
