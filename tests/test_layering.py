"""The core stays pure: nothing under estimator/ reads the catalogs, probes the machine or talks to
the user. Checked on the source's import statements, including the ones inside functions."""
import ast
from pathlib import Path

import pytest

ESTIMATOR = Path(__file__).resolve().parent.parent / "estimator"
EDGES = ("fitprobe.catalogs", "fitprobe.probe", "fitprobe.app", "fitprobe.usecases", "fitprobe.cli", "click",
         "huggingface_hub", "psutil", "pynvml")


def imported_modules(path: Path) -> list[str]:
    """Absolute names of every module the file imports (relative imports resolved from its package)."""
    package = ["fitprobe", "estimator", *path.relative_to(ESTIMATOR).parent.parts]
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            names.append(".".join([*base, *([node.module] if node.module else [])]))
    return names


@pytest.mark.parametrize("path", sorted(ESTIMATOR.rglob("*.py")), ids=lambda p: str(p.relative_to(ESTIMATOR)))
def test_estimator_imports_no_edge(path):
    edges = [m for m in imported_modules(path) if any(m == e or m.startswith(e + ".") for e in EDGES)]
    assert not edges, f"{path.name} imports {edges}: data and readings are passed in by the edge"
