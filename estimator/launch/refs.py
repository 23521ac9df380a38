"""What the catalog knows about where a model's weights can be downloaded, per format.

Commands name a file only when a catalog fact (with its source and the date it was seen) says it
exists: a GGUF repo that holds the quant, an Ollama tag for that quantization, an MLX conversion,
an AWQ/GPTQ/FP8/NVFP4 checkpoint. The planners read these through `LaunchInput.refs`.
"""
from __future__ import annotations

from fitprobe.estimator.fields import doc, record


@record
class RepoRef:
    repo: str = doc(description="Hub repo id (or Ollama tag)")
    source: str = doc(description="where this was seen")
    seen: str = doc(description="date seen, YYYY-MM-DD")


@record
class GgufRepoRef(RepoRef):
    quants: list[str] = doc(default_factory=list, description="quant names this repo holds (as in its file names)")


@record
class ModelRefs:
    gguf: list[GgufRepoRef] = doc(default_factory=list)
    ollama: dict[str, RepoRef] = doc(default_factory=dict, description="quant name -> Ollama library tag")
    mlx: dict[str, RepoRef] = doc(default_factory=dict, description="MLX format name (MLX-4bit) -> repo")
    checkpoints: dict[str, RepoRef] = doc(default_factory=dict, description="AWQ/GPTQ/FP8/NVFP4 -> repo")


def _same(a: str, b: str) -> bool:
    return a.upper().replace("-", "_") == b.upper().replace("-", "_")


def gguf_repo_for(refs: ModelRefs, quant: str) -> GgufRepoRef | None:
    """The first known GGUF repo that holds this quant."""
    return next((r for r in refs.gguf if any(_same(q, quant) for q in r.quants)), None)


def ollama_tag_for(refs: ModelRefs, quant: str) -> RepoRef | None:
    return next((ref for q, ref in refs.ollama.items() if _same(q, quant)), None)
