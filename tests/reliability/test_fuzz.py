"""Property-based fuzzing (hypothesis) of the boundaries: config.json values, GGUF header metadata and
CLI options. The invariant: an input is either sized (with non-negative bytes) or refused with the
boundary's own error — SpecError / GgufFileError / a usage error — never any other exception."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fitprobe.catalogs.models import find_model
from fitprobe.catalogs.quants import quant_table
from fitprobe.cli import main
from fitprobe.estimator import config as config_module
from fitprobe.estimator.config import SpecError, spec_from_config
from fitprobe.estimator.kv import kv_cache
from fitprobe.estimator.quant import weight_bytes
from fitprobe.estimator.settings import RunSettings
from fitprobe.estimator.tensors import param_counts

BASES = ["qwen3-30b-a3b", "deepseek-v3", "gemma-3-27b-it", "qwen3-next-80b-a3b-thinking", "llama-4-scout-17b-16e-instruct",
         "nemotron-3-nano-30b-a3b", "gpt-oss-20b", "mixtral-8x7b-v0.1", "lfm2.5-vl-1.6b"]
CONFIGS = {name: find_model(name).config for name in BASES}
TABLE = quant_table()
KEYS = sorted(config_module._FIELDS)

json_scalars = (st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.integers(-5, 70)
                | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=5)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _size(spec) -> None:
    """What the estimator does with an accepted spec must work and give real sizes."""
    assert param_counts(spec).total >= 0
    assert weight_bytes(spec, TABLE.find("Q4_K_M"), TABLE).total >= 0
    assert kv_cache(spec, RunSettings(context=4096)).total >= 0


@FUZZ
@given(st.sampled_from(BASES), st.dictionaries(st.sampled_from(KEYS), json_values, min_size=1, max_size=4))
def test_config_values_are_sized_or_refused(base, changes):
    cfg = {**CONFIGS[base], **changes}
    try:
        spec = spec_from_config(cfg, name=base)
    except SpecError as exc:
        assert "\n" not in str(exc)
        return
    _size(spec)


@FUZZ
@given(st.sampled_from(BASES), st.sampled_from(["vision_config", "quantization_config", "text_config"]),
       st.dictionaries(st.sampled_from(KEYS + ["bits", "group_size", "depth", "config_groups", "ignore"]), json_values,
                       max_size=4) | json_values)
def test_nested_configs_are_sized_or_refused(base, key, value):
    cfg = {**CONFIGS[base], key: value}
    try:
        spec = spec_from_config(cfg, name=base)
    except SpecError:
        return
    _size(spec)


GGUF_KEYS = ["block_count", "embedding_length", "attention.head_count", "attention.head_count_kv",
             "feed_forward_length", "context_length", "attention.key_length", "attention.sliding_window",
             "expert_count", "expert_used_count", "attention.kv_lora_rank", "rope.dimension_count"]
gguf_values = (st.tuples(st.just("UINT32"), st.integers(0, 2**32 - 1))
               | st.tuples(st.just("INT32"), st.integers(-(2**31), 2**31 - 1))
               | st.tuples(st.just("FLOAT32"), st.floats(-1e6, 1e6, width=32))
               | st.tuples(st.just("STRING"), st.text(max_size=6))
               | st.tuples(st.just("BOOL"), st.booleans()))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["llama", "qwen3moe", "deepseek2", "gemma3", "bogus"]),
       st.dictionaries(st.sampled_from(GGUF_KEYS), gguf_values, min_size=1, max_size=4))
def test_gguf_headers_are_read_or_refused(arch, changes):
    gguf = pytest.importorskip("gguf")
    import numpy as np

    from fitprobe.catalogs.gguf_file import GgufFileError, gguf_to_config, read_gguf

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.gguf"
        w = gguf.GGUFWriter(str(path), arch)
        w.add_token_list([f"t{i}" for i in range(8)])
        base = {"block_count": 2, "embedding_length": 64, "attention.head_count": 4, "attention.head_count_kv": 2,
                "feed_forward_length": 128, "context_length": 256}
        for key, value in base.items():
            w.add_key_value(f"{arch}.{key}", value, gguf.GGUFValueType.UINT32)
        for key, (kind, value) in changes.items():
            w.add_key_value(f"{arch}.{key}", value, getattr(gguf.GGUFValueType, kind))
        w.add_tensor("token_embd.weight", np.zeros((8, 64), dtype=np.float16))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        try:
            spec = spec_from_config(gguf_to_config(read_gguf(path)), name="fuzz", where=str(path))
        except (GgufFileError, SpecError) as exc:
            assert "\n" not in str(exc)
            return
        _size(spec)


option_values = (st.sampled_from(["nan", "inf", "-inf", "1e400", "-1", "0", "1e-300", "0x10", "", " ", "1,5", "½"])
                 | st.floats(allow_nan=True, allow_infinity=True).map(repr) | st.integers().map(str) | st.text(max_size=10))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["--ram-gib", "--memory-gib", "--min-margin", "--require-tps", "--gpus", "--usable",
                        "--gpu-util", "--timeout", "--ctx", "--batch", "--require-context", "--ubatch", "--ngl"]),
       option_values, st.booleans())
def test_options_are_used_or_refused_in_one_line(option, value, as_json):
    if value.startswith("-") and value not in ("-1", "-inf"):  # click would read it as an option name
        value = " " + value
    args = ["plan", "qwen3-0.6b", "--gpu", "RTX 4090", option, value, *(["--json"] if as_json else [])]
    r = CliRunner().invoke(main, args)
    assert r.exit_code in (0, 1, 2), (args, r.output)
    if r.exit_code == 2:
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, r.output)
        if as_json:
            assert json.loads(r.stdout)["error"]["kind"] == "usage"
    else:
        assert r.stderr == "" or not r.stderr.startswith("error"), (args, r.output)
        if as_json:
            json.loads(r.stdout)
