"""--ram-bw, --threads, --cpu-ghz and --cpu-class reach the speed estimate of CPU-only plans; bad values are one-line
usage errors."""
import json

from click.testing import CliRunner

from fitprobe.catalogs.speed_calibration import load_calibration
from fitprobe.cli import main


def _speed(*extra):
    res = CliRunner().invoke(main, ["plan", "llama-3.1-8b-instruct", "--gpu", "cpu", "--ram-gib", "64", "--json",
                                    *extra])
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.output)["speed"]


def test_threads_and_ram_bandwidth_change_cpu_decode():
    two, many = _speed("--threads", "2", "--ram-bw", "90"), _speed("--threads", "32", "--ram-bw", "90")
    assert two["decode_tps"] < many["decode_tps"]
    assert _speed("--threads", "32", "--ram-bw", "180")["decode_tps"] > many["decode_tps"]
    s = load_calibration().cpu.serial_share  # prefill scales with threads, less Amdahl's serial share
    assert abs(many["prefill_tps"] / two["prefill_tps"] - 16 * (1 + s) / (1 + 31 * s)) < 1e-6
    slow, fast = _speed("--threads", "2", "--cpu-ghz", "2"), _speed("--threads", "2", "--cpu-ghz", "4")
    assert abs(fast["prefill_tps"] / slow["prefill_tps"] - 2) < 1e-6 and fast["decode_tps"] > slow["decode_tps"]
    assert not any("CPU clock unknown" in n for n in slow["notes"])
    assert any("CPU clock unknown" in n for n in two["notes"])


def test_cpu_class_prices_the_cores_of_a_machine_not_probed():
    """`plan` on named hardware takes x86 cores unless told: --cpu-class atom prices an N100 mini PC's cores at half
    an x86 core's rate, which normiebench #38's N100 (3.0 tok/s, Llama-3.1-8B Q4_K_M) decoded at."""
    host = ("--threads", "4", "--cpu-ghz", "3.4", "--ram-bw", "38.4")
    x86, atom = _speed(*host), _speed(*host, "--cpu-class", "atom")
    assert abs(atom["prefill_tps"] / x86["prefill_tps"] - 0.5) < 1e-6
    assert atom["decode_tps"] < x86["decode_tps"] and 2.5 < atom["decode_tps"] < 3.6
    assert any("Atom-line" in n for n in atom["notes"]) and not any("Atom-line" in n for n in x86["notes"])
    assert _speed(*host, "--cpu-class", "x86_64") == x86
    assert _speed(*host, "--cpu-class", "arm64")["prefill_tps"] > x86["prefill_tps"]


def test_bad_host_speed_options_are_usage_errors():
    for args in (["--ram-bw", "0"], ["--threads", "-1"], ["--cpu-ghz", "0"], ["--cpu-ghz", "nan"], ["--cpu-ghz", "40"],
                 ["--cpu-class", "sparc"]):
        res = CliRunner().invoke(main, ["plan", "qwen3-0.6b", "--gpu", "cpu", "--ram-gib", "8", *args])
        assert res.exit_code == 2 and "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


def test_the_command_runs_the_threads_the_speed_counts():
    """Where layers compute on the CPU, the printed llama-server command passes the thread count the speed
    estimate assumed; all on the GPU, it leaves llama.cpp's default alone."""
    def command(*args):
        res = CliRunner().invoke(main, ["plan", "llama-3.1-8b-instruct", "--json", *args])
        assert res.exit_code in (0, 1), res.output
        return json.loads(res.output)["recommended"]["command"]

    assert "--threads 8" in command("--gpu", "cpu", "--ram-gib", "64", "--threads", "8")
    assert "--threads" not in command("--gpu", "RTX 4090", "--threads", "8")
    assert "--threads 6" in command("--gpu", "RTX 4090", "--ngl", "10", "--ram-gib", "64", "--threads", "6")
    res = CliRunner().invoke(main, ["plan", "llama-3.1-8b-instruct", "--json", "--gpu", "cpu", "--ram-gib", "64",
                                    "--threads", "8"])
    ollama = {f["flag"]: f["value"] for f in json.loads(res.output)["launch"]["ollama"]["flags"]}
    assert ollama["num_thread"] == "8"  # Ollama takes it per model (Modelfile PARAMETER or API option)
