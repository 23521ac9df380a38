"""The gate's exit codes end to end through the CLI: 0 pass, 1 a requirement fails, 2 usage, 3 model, 4 hardware."""
import json

from click.testing import CliRunner

from fitprobe.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args))


def gate(result):
    return json.loads(result.stdout)["gate"]


def test_pass_exits_0_and_json_says_so():
    r = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--require-context", "32768", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema_version"] and doc["settings"]["context"] == 32768
    g = doc["gate"]
    assert g["passed"] and g["failed"] == [] and g["subject"] == "launch.llama.cpp"
    assert {c["name"] for c in g["checks"]} == {"fit", "context"}


def test_context_requirement_fails_when_the_plan_must_shorten_it():
    r = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "-q", "BF16", "--engine", "vllm",
            "--kv-cache", "auto", "--require-context", "131072", "--json")
    assert r.exit_code == 1
    g = gate(r)
    assert not g["passed"] and g["failed"] == ["context"]
    ctx = next(c for c in g["checks"] if c["name"] == "context")
    assert int(ctx["actual"]) < 131072


def test_fit_requirement_fails_when_nothing_fits():
    # (on an RTX 3060, 11.64 GiB to CUDA, even 8 cards are short: no fix to list)
    r = run("plan", "qwen3-30b-a3b", "--gpu", "RTX 3090", "-q", "BF16", "--engine", "sglang",
            "--require-context", "8192", "--json")
    assert r.exit_code == 1
    assert "fit" in gate(r)["failed"]
    assert json.loads(r.stdout)["fixes"], "a plan that does not fit lists what would make it fit"


def test_margin_and_strict():
    r = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--min-margin", "30GiB", "--json")
    assert r.exit_code == 1 and "margin" in gate(r)["failed"]
    ok = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--strict", "--json")
    assert ok.exit_code == 0 and gate(ok)["checks"][0]["required"] == "fits"


def test_speed_requirement_reports_the_estimate():
    r = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--require-tps", "100000", "--json")
    assert r.exit_code == 1 and gate(r)["failed"] == ["speed"]
    speed = next(c for c in gate(r)["checks"] if c["name"] == "speed")
    assert speed["required"] == "100000" and speed["reason"]


def test_no_gate_options_keep_plain_verdict_exit_codes():
    r = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["gate"] is None


def test_usage_errors_exit_2():
    assert run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--require-context", "-5").exit_code == 2
    assert run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--require-tps", "0").exit_code == 2
    r = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--verify", "--llama-fit-params", "/nonexistent")
    assert r.exit_code == 2 and "llama-fit-params" in r.stderr


def test_unknown_model_exits_3():
    r = run("plan", "no-such-model-xyz", "--gpu", "RTX 4090", "--require-context", "8192")
    assert r.exit_code == 3 and r.stderr.startswith("error:")


def test_unprobeable_hardware_exits_4(monkeypatch):
    from fitprobe import usecases
    from fitprobe.errors import HardwareError

    def broken(*_args, **_kwargs):
        raise HardwareError("could not probe this machine: test")

    monkeypatch.setattr(usecases, "probed", broken)
    r = run("check", "llama-3.1-8b-instruct", "--require-context", "8192", "--json")
    assert r.exit_code == 4 and "could not probe" in r.stderr
    assert json.loads(r.stdout) == {"error": {"code": 4, "kind": "hardware",
                                              "message": "could not probe this machine: test"}}


def test_json_on_stdout_and_text_on_stderr():
    r = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--json", "--text", "--require-context", "8192")
    assert r.exit_code == 0
    json.loads(r.stdout)
    assert "$ llama-server" in r.stderr and "Gate: PASS" in r.stderr


def test_human_output_lists_commands_and_reasons():
    r = run("plan", "qwen3-30b-a3b", "--gpu", "RTX 3060", "-q", "Q8_0", "--ctx", "16384", "--ram-gib", "64")
    assert r.exit_code == 0  # the recommended deployment (experts in RAM) fits: that is the answer
    assert "As asked (Q8_0" in r.stdout and "DOES NOT FIT" in r.stdout
    assert "$ llama-server" in r.stdout and "--n-cpu-moe" in r.stdout and "What would make it fit as asked" in r.stdout
    r = run("plan", "qwen3-30b-a3b", "--gpu", "RTX 3060", "-q", "Q8_0", "--ctx", "16384", "--ram-gib", "64", "--full")
    assert "Launch commands" in r.stdout and "--n-cpu-moe" in r.stdout and "routed experts" in r.stdout


def test_context_beyond_the_model_maximum_fails_the_gate():
    # Llama 3.1 8B declares 131072 positions: a 200K requirement cannot be met on any hardware
    r = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--require-context", "200000", "--json")
    assert r.exit_code == 1
    ctx = next(c for c in gate(r)["checks"] if c["name"] == "context")
    assert not ctx["passed"] and ctx["actual"] == "131072" and "maximum context" in ctx["reason"]
