"""Parts of a checkpoint or GGUF file that engines do not load: GLM nextn layers, MTP, the vision tower."""
import pytest

from fitprobe.catalogs.quants import find_quant, quant_table
from fitprobe.catalogs.resolve import text_weights_from_checkpoint
from fitprobe.estimator.hardware import Device, Hardware
from fitprobe.estimator.memory import estimate
from fitprobe.estimator.quant import weight_bytes
from fitprobe.estimator.settings import RunSettings

GIB = 1 << 30


def test_glm_gguf_file_holds_the_skipped_nextn_layer(spec_of):
    spec = spec_of("glm-4.5-air")
    w = weight_bytes(spec, find_quant("Q4_K_M"), quant_table())
    assert spec.mtp_layers == 1 and w.file_only == w.mtp > 0
    # one of 47 blocks (the MoE nextn layer): about 2 % of the file
    assert 0.01 < w.file_only / w.total < 0.04
    hw = Hardware(devices=[Device(name="H200", memory_bytes=141 * GIB)])
    mem = estimate(spec, find_quant("Q4_K_M"), quant_table(), RunSettings(), hw)
    assert mem.model_file_bytes == w.total + w.file_only
    assert mem.weights_bytes + mem.host_weights_bytes == w.total  # not loaded


@pytest.mark.parametrize("name", ["deepseek-v3", "qwen3.5-35b-a3b"])
def test_other_mtp_layers_are_not_in_the_gguf(spec_of, name):
    w = weight_bytes(spec_of(name), find_quant("Q4_K_M"), quant_table())
    assert w.mtp > 0 and w.file_only == 0


@pytest.mark.parametrize("name", ["glm-4.5-air", "deepseek-v3", "qwen3.5-27b", "llama-3.1-8b-instruct"])
def test_checkpoint_size_loses_vision_and_mtp_before_rescaling(spec_of, name):
    spec = spec_of(name)
    bf16 = find_quant("BF16")
    w = weight_bytes(spec, bf16, quant_table())
    checkpoint = w.total + w.vision + w.mtp  # what the safetensors files hold
    got = text_weights_from_checkpoint(spec, bf16, checkpoint)
    assert got.total == w.total
    assert sum(got.per_layer) == pytest.approx(sum(w.per_layer), rel=1e-6)
