"""Fixtures: a loopback Hub per test, HF_ENDPOINT/HF_HOME pointed at it and a tmp cache."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from .hubserver import FakeHub, FakeRepo, Listed

FIXTURES = Path(__file__).parent / "fixtures"
SHA_A = "a" * 40
SHA_B = "b" * 40


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def safetensors_bytes(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """A real safetensors file (8-byte header length, JSON header, zeroed data)."""
    width = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "I32": 4, "U8": 1}
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = width[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\0" * offset


def listing_repo(repo_id: str, **kw) -> FakeRepo:
    """A GGUF repo from the recorded listing (names + sha256 real, sizes test values)."""
    data = json.loads(fixture_bytes("gguf_listings.json"))["repos"][repo_id]
    files = {f["path"]: Listed(f["size"], f["sha256"]) for f in data["files"]}
    return FakeRepo(repo_id, data["commit"], files={"README.md": b"# card\n", **files}, tags=["gguf"], **kw)


@pytest.fixture
def hub(monkeypatch, tmp_path):
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
                "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    h = FakeHub().start()
    monkeypatch.setenv("HF_ENDPOINT", h.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    yield h
    h.stop()
