"""llama.cpp's own `print_info: model params` line on a sparse GGUF of each model added from the seed pages,
against fitprobe's count and the published figure (issue #14's cross-check for assembled and new entries;
the buffer tests compare every tensor's bytes for all mapped models)."""
from __future__ import annotations

import re

import pytest

from fitprobe.catalogs.models import find_model
from fitprobe.estimator.tensors import param_counts
from fitprobe.llama_tools import run

from .conftest import mapped_models, spec_of

ADDED = ["llama-3.2-3b-instruct", "mixtral-8x7b-instruct-v0.1", "qwen3-coder-30b-a3b-instruct",
         "deepseek-r1-distill-llama-8b", "deepseek-r1-distill-qwen-32b", "qwen3-4b-instruct-2507",
         "qwen3-30b-a3b-instruct-2507", "qwen3.8-2.4t-a95b", "kimi-dev-72b", "deepseek-r1-distill-llama-70b",
         "deepseek-r1-distill-qwen-14b", "mixtral-8x22b-instruct-v0.1", "llama-3.1-405b-instruct",
         "qwen3-235b-a22b-instruct-2507"]
_UNIT = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


@pytest.mark.parametrize("model", [m for m in ADDED if m in mapped_models()])
def test_llama_cpp_counts_the_published_parameters(model, llama_bin, source_gguf):
    out, err = run([str(llama_bin / "llama-fit-params"), "-m", str(source_gguf(model)), "--fit-print", "on",
                    "-v", "-c", "512"], timeout_s=300, done=lambda o, e: "model params" in o + e)
    line = re.search(r"print_info: model params\s*=\s*([\d.]+) ([KMBT])", out + err)
    assert line, "llama.cpp printed no model params line"
    printed = float(line.group(1)) * _UNIT[line.group(2)]
    counted = param_counts(spec_of(model)).text  # the GGUF holds the language model (no MTP, no vision)
    assert abs(printed - counted) <= 0.005 * counted  # llama.cpp prints 3-4 significant digits
    entry = find_model(model)
    allowed = max(0.02 * entry.published_params, (entry.published_params_rounding or 0) / 2)
    assert abs(printed - entry.published_params) <= allowed
