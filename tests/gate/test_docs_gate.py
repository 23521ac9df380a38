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


def run_with(script: Path, path: str, *args: str, **env_extra: str):
    env = dict(os.environ, PATH=path, **env_extra)
    return subprocess.run(["bash", str(script), *args], cwd=script.parent, env=env, capture_output=True, text=True,
                          timeout=300)


def _bare_path(tmp_path: Path) -> str:
    """A PATH with python3 (the script parses JSON with it) but no fitprobe."""
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    (bare / "python3").symlink_to(sys.executable)
    return f"{bare}{os.pathsep}/usr/bin{os.pathsep}/bin"


def test_missing_fitprobe_fails_closed(script, tmp_path):
    r = run_with(script, _bare_path(tmp_path), "llama-3.1-8b-instruct", "RTX 4090")
    assert r.returncode == 127 and "gate closed" in r.stdout and "gate passed" not in r.stdout


def test_internal_error_fails_closed(script, tmp_path):
    """A fitprobe that crashes (exit 70, one line on stderr) must block provisioning."""
    fake = tmp_path / "bin" / "fitprobe"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'error: internal error: ZeroDivisionError: division by zero' >&2\nexit 70\n")
    fake.chmod(0o755)
    r = run_with(script, f"{fake.parent}{os.pathsep}{_bare_path(tmp_path)}", "llama-3.1-8b-instruct", "RTX 4090")
    assert r.returncode == 70 and "fitprobe failed (exit 70): gate closed" in r.stdout


def test_unreachable_hub_is_retry_later(script):
    """A Hub id while the Hub refuses connections (port 9) and no cache or bundled copy: 75, not 3."""
    env_path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    r = run_with(script, env_path, "someorg/not-a-bundled-model", "RTX 4090", HF_ENDPOINT="http://127.0.0.1:9",
                 HF_HOME=str(script.parent / "hf-home"))
    assert r.returncode == 75 and "retry later" in r.stdout


def test_misconfigured_gate_prints_the_json_error(script):
    r = run(script, "llama-3.1-8b-instruct", "RTX 4090", "0")
    assert r.returncode == 2 and r.stdout.startswith("gate misconfigured:") and "--gpus" in r.stdout
