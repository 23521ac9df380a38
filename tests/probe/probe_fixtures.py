"""Helpers for probe tests: read recorded outputs from fixtures/ (provenance in fixtures/SOURCES.md)."""
from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def capture_section(name: str, title: str) -> str:
    """Body of one section of an nvidia_gpu_exporter capture ('# idle :: query-gpu ...')."""
    lines = fixture_text(name).splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"# {title}"))
    body_start = start + 2  # title line, command line ... then the closing rule
    while lines[body_start].startswith("#"):
        body_start += 1
    end = body_start
    while end < len(lines) and not lines[end].startswith("####"):
        end += 1
    return "\n".join(lines[body_start:end])
