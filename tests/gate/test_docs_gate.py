"""The provisioning-script example in docs/gate.md, run as written against the installed CLI."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).parents[2] / "docs" / "gate.md"


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> Path:
    text = DOC.read_text()
    block = re.search(r"<!-- gate-example[^>]*-->\s*```bash\n(.*?)```", text, re.S)
    assert block, "docs/gate.md lost its gate example"
    path = tmp_path_factory.mktemp("gate") / "provision-gate.sh"
    path.write_text(block.group(1))
    path.chmod(0o755)
    return path


def run(script: Path, *args: str):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(["bash", str(script), *args], cwd=script.parent, env=env, capture_output=True, text=True,
                          timeout=300)


def test_gate_passes_and_prints_the_launch_command(script):
    r = run(script, "llama-3.1-8b-instruct", "RTX 4090")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("gate passed") and "llama-server" in r.stdout and "--ctx-size 32768" in r.stdout


def test_gate_fails_with_the_requirements_named(script):
    r = run(script, "llama-3.1-70b-instruct", "RTX 3060")
    assert r.returncode == 1
    assert r.stdout.startswith("gate failed:") and "speed" in r.stdout


def test_unknown_model_exits_3(script):
    r = run(script, "no-such-model-xyz", "RTX 4090")
    assert r.returncode == 3 and "model not found" in r.stdout
