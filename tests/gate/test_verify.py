"""--verify: llama-fit-params run as a stand-in executable that prints recorded real output."""
import json
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fitprobe.cli import main
from fitprobe.verify import compare, parse_output, run_fit_params

from planhelpers import make_input

FIXTURE = Path(__file__).parent / "fixtures" / "fit_params_readme.txt"


def recorded() -> tuple[str, str]:
    lines = [x for x in FIXTURE.read_text().splitlines() if not x.startswith("#")]
    cut = lines.index("---STDOUT---")
    return "\n".join(lines[:cut]) + "\n", "\n".join(lines[cut + 1:]) + "\n"


@pytest.fixture()
def stand_in(tmp_path) -> str:
    """An executable that prints the README's output and records the arguments it got."""
    err, out = recorded()
    script = tmp_path / "llama-fit-params"
    script.write_text(f"#!{sys.executable}\nimport sys, json\n"
                      f"open({str(tmp_path / 'args.json')!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
                      f"sys.stderr.write({err!r})\nsys.stdout.write({out!r})\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_parse_recorded_output():
    err, out = recorded()
    p = parse_output(out, err)
    assert p["context"] == 4096 and p["gpu_layers"] == 48
    assert p["projected_initial_mib"] == 61807 and p["free_mib"] == 24077
    d = p["devices"][0]
    assert (d.device, d.layers, d.overflowing_layers, d.llama_mib, d.free_mib) == ("CUDA0", 48, 34, 19187, 1199)


def test_run_and_compare_beside_fitprobe(stand_in, tmp_path):
    inp = make_input("qwen3-30b-a3b", "RTX 4090", quant="BF16", ctx=4096, engine="llama.cpp")
    res = run_fit_params(stand_in, "/models/qwen3-30b-a3b-f16.gguf", inp.settings)
    assert res.ok and res.fitted_args.startswith("-c 4096 -ngl 48")
    args = json.loads((tmp_path / "args.json").read_text())
    assert args[:2] == ["--model", "/models/qwen3-30b-a3b-f16.gguf"] and "--fit-ctx" in args
    res = compare(res, inp)
    d = res.devices[0]
    assert d.fitprobe_mib and d.difference_mib == d.fitprobe_mib - 19187 and res.difference_mib == d.difference_mib
    # same model, same -ngl and overflowing experts: fitprobe lands within 15% of llama.cpp's own projection
    assert abs(d.difference_mib) < 0.15 * 19187


def test_failures_are_one_line(tmp_path):
    inp = make_input("llama-3.1-8b-instruct", "RTX 4090")
    missing = run_fit_params(str(tmp_path / "nope"), "x.gguf", inp.settings)
    assert not missing.ok and missing.error.startswith("cannot run")
    bad = tmp_path / "bad"
    bad.write_text(f"#!{sys.executable}\nimport sys\nsys.stderr.write('error: failed to load model\\n')\nsys.exit(1)\n")
    bad.chmod(0o755)
    res = run_fit_params(str(bad), "x.gguf", inp.settings)
    assert not res.ok and "exited 1" in res.error and "failed to load model" in res.error


def test_cli_verify_on_a_local_gguf(stand_in, tmp_path):
    gguf = pytest.importorskip("gguf")
    import numpy as np

    path = tmp_path / "tiny-Q8_0.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    for method, value in {"add_name": "tiny", "add_block_count": 2, "add_context_length": 4096,
                          "add_embedding_length": 64, "add_feed_forward_length": 128, "add_head_count": 4,
                          "add_head_count_kv": 2, "add_file_type": int(gguf.LlamaFileType.MOSTLY_Q8_0),
                          "add_token_list": [f"t{i}" for i in range(100)]}.items():
        getattr(w, method)(value)
    w.add_tensor("token_embd.weight", np.zeros((100, 64), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = CliRunner().invoke(main, ["plan", str(path), "--gpu", "RTX 4090", "--ctx", "4096", "--verify",
                                  "--llama-fit-params", stand_in, "--json"])
    assert r.exit_code == 0, r.output
    v = json.loads(r.stdout)["verify"]
    assert v["ok"] and v["gpu_layers"] == 48 and v["devices"][0]["llama_mib"] == 19187
