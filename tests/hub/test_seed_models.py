"""Every model the calculator seed pages list resolves offline by its display name and by its Hub id,
or is listed here with the reason it does not: its architecture is not modelled yet (exit 3 naming
what is missing) or no config.json for it could be sourced."""
import re
from pathlib import Path

import pytest

from fitprobe.catalogs.models import find_model
from fitprobe.catalogs.resolve import ResolveError, resolve

LISTS = Path(__file__).parent / "fixtures" / "seed_model_lists.txt"

# display name on the seed pages -> bundled catalog name
RESOLVES = {
    "Qwen3.8 2.4T-A95B": "qwen3.8-2.4t-a95b", "Qwen3.6 35B-A3B": "qwen3.6-35b-a3b",
    "Qwen3.5 397B-A17B": "qwen3.5-397b-a17b", "Qwen3.5 122B-A10B": "qwen3.5-122b-a10b",
    "Qwen3.5 35B-A3B": "qwen3.5-35b-a3b", "Qwen3.5 27B": "qwen3.5-27b", "Qwen3.5 9B": "qwen3.5-9b",
    "Qwen3 Coder 480B-A35B": "qwen3-coder-480b-a35b-instruct", "Qwen3 Coder 30B-A3B": "qwen3-coder-30b-a3b-instruct", "Qwen3 32B": "qwen3-32b", "Qwen3 14B": "qwen3-14b",
    "Qwen3 8B": "qwen3-8b", "Qwen3 4B Instruct 2507": "qwen3-4b-instruct-2507",
    "Qwen3 30B-A3B Instruct 2507": "qwen3-30b-a3b-instruct-2507",
    "Qwen3 235B-A22B Instruct 2507": "qwen3-235b-a22b-instruct-2507",
    "DeepSeek R1-0528 671B": "deepseek-r1-0528", "DeepSeek V3-0324 671B": "deepseek-v3-0324", "Gemma 4 26B-A4B IT": "gemma-4-26b-a4b-it", "Qwen3 1.7B": "qwen3-1.7b", "Qwen3 0.6B": "qwen3-0.6b",
    "Qwen2.5 72B Instruct": "qwen2.5-72b-instruct", "QwQ 32B Reasoning": "qwq-32b",
    "DeepSeek V4 Flash": "deepseek-v4-flash", "DeepSeek R1 Distill Qwen 32B": "deepseek-r1-distill-qwen-32b",
    "DeepSeek R1 Distill Llama 8B": "deepseek-r1-distill-llama-8b", "DeepSeek R1 Distill Llama 70B": "deepseek-r1-distill-llama-70b",
    "DeepSeek R1 Distill Qwen 14B": "deepseek-r1-distill-qwen-14b", "DeepSeek V3.2 (685B)": "deepseek-v3.2",
    "gpt-oss-20b": "gpt-oss-20b", "gpt-oss-120b": "gpt-oss-120b", "Gemma 4 31B IT": "gemma-4-31b-it",
    "Gemma 3 27B IT": "gemma-3-27b-it", "Gemma 3 12B IT": "gemma-3-12b-it", "Gemma 3 4B IT": "gemma-3-4b-it",
    "GLM-5.3 (753B)": "glm-5.3", "GLM-5 (744B)": "glm-5", "GLM-4.5 (355B-A32B)": "glm-4.5",
    "GLM-4.5 Air (110B-A12B)": "glm-4.5-air", "GLM-4 32B-0414": "glm-4-32b-0414",
    "Kimi K2 Instruct (1T-A32B)": "kimi-k2-instruct", "Kimi-Dev 72B": "kimi-dev-72b", "MiniMax M2.5 (229B-A10B)": "minimax-m2.5",
    "ERNIE 4.5 300B-A47B (文心)": "ernie-4.5-300b-a47b-pt", "ERNIE 4.5 21B-A3B (文心)": "ernie-4.5-21b-a3b-pt",
    "Hunyuan A13B Instruct (混元 80B)": "hunyuan-a13b-instruct",
    "Llama 4 Maverick 17B-128E (400B)": "llama-4-maverick-17b-128e-instruct",
    "Llama 4 Scout 17B-16E (109B)": "llama-4-scout-17b-16e-instruct", "Llama 3.3 70B Instruct": "llama-3.3-70b-instruct",
    "Llama 3.1 405B Instruct": "llama-3.1-405b-instruct",
    "Llama 3.1 8B Instruct": "llama-3.1-8b-instruct", "Llama 3.2 3B Instruct": "llama-3.2-3b-instruct",
    "Mixtral 8x7B Instruct": "mixtral-8x7b-instruct-v0.1", "Mixtral 8x22B Instruct": "mixtral-8x22b-instruct-v0.1", "Nemotron 3 Ultra 550B-A55B": "nemotron-3-ultra-550b-a55b",
    "Nemotron 3 Super 120B-A12B": "nemotron-3-super-120b-a12b",
    "Nemotron 3 Nano 30B-A3B": "nemotron-3-nano-30b-a3b", "Phi-4 14B": "phi-4",
}

# known, config at hand, architecture not modelled: exit 3 naming what is missing
UNMODELLED = {
    "GLM-5.3 Flash (320B-A18B)": ("zai-org/GLM-5.3-Flash", "glm5_next"),
    "Kimi K3 (2.8T-A104B)": ("moonshotai/Kimi-K3", "kimi_linear"),
    "Step-3.7 Flash (198B-A11B)": ("stepfun-ai/Step-3.7-Flash", "step3p7"),
}

# not sourced: no config.json (verbatim or enough published dimensions) was reachable here
NO_CONFIG = "no config.json, fixture or published dimension set found in the searched corpora"
UNSOURCED = {
    "Qwen3.8 Flash Next (125B-A6B)": NO_CONFIG, "Qwen3.8 27B": NO_CONFIG, "Qwen3.5 4B": NO_CONFIG,
    "Qwen3 Coder Next 80B-A3B": NO_CONFIG,
    "Qwen2.5 Coder 32B Instruct": NO_CONFIG,
    "DeepSeek V4.1 Flash (552B-A16B)": NO_CONFIG,
    "Gemma 4 12B IT": NO_CONFIG, "Gemma 4 E4B IT": NO_CONFIG, "Gemma 4 E2B IT": NO_CONFIG,
    "Kimi K3.1 Pro (2.8T-A104B)": NO_CONFIG,
    "MiniMax M3.1 Flash (428B-A23B)": NO_CONFIG, "Step-5 Preview (600B-A27B)": NO_CONFIG,
    "Step-3.5 Flash (197B-A11B)": "no config.json found; its step3p5 architecture is not modelled either (see Step-3.7 Flash)",
    "MiniCPM5 2B (面壁)": NO_CONFIG,
    "Mistral Large 4 (1T-A52B)": NO_CONFIG, "Mistral Large 2 123B": NO_CONFIG,
    "Mistral Small 3.2 24B": NO_CONFIG, "Devstral Small 24B": NO_CONFIG, "Cohere Command A 111B": NO_CONFIG,
    "Liquid LFM3 1.7B": NO_CONFIG,
}


def _page_names() -> list[str]:
    """The seed pages' model lists split into display names. The pages run names together, so a line
    is tiled by the names this file knows; a name it does not know leaves the line untiled."""
    known = {re.sub(r"\s+", "", n): n for n in (*RESOLVES, *UNMODELLED, *UNSOURCED)}
    names = []
    for line in LISTS.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            continue
        text = re.sub(r"\s+", "", line.split(": ", 1)[1])
        tiling: list[list[str] | None] = [[]] + [None] * len(text)
        for i in range(len(text)):
            if tiling[i] is not None:
                for key, name in known.items():
                    if text.startswith(key, i) and tiling[i + len(key)] is None:
                        tiling[i + len(key)] = tiling[i] + [name]
        assert tiling[-1] is not None, f"a seed page lists a model this test does not know: {line[:60]}..."
        names += tiling[-1]
    return names


def test_every_seed_model_is_accounted_for():
    names = set(_page_names())
    assert names == set(RESOLVES) | set(UNMODELLED) | set(UNSOURCED)
    assert len(names) == 80 and len(RESOLVES) >= 43


@pytest.mark.parametrize("display,name", RESOLVES.items())
def test_seed_display_name_and_hub_id_resolve_offline(hub, monkeypatch, display, name):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    by_display = resolve(display)
    assert by_display.spec.name == name and by_display.source == "bundled catalog"
    by_id = resolve(by_display.entry.hf_id)  # the Hub first: offline, the bundled snapshot answers
    assert by_id.entry.name == name and "Hub unreachable" in by_id.source
    assert hub.requests == []


@pytest.mark.parametrize("display,known", UNMODELLED.items())
def test_unmodelled_seed_models_fail_closed_naming_the_architecture(hub, monkeypatch, display, known):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hf_id, arch = known
    for typed in (display, hf_id):
        with pytest.raises(ResolveError) as err:
            resolve(typed)
        assert err.value.kind.code == 3
        assert f"'{arch}" in str(err.value) and "not modelled" in str(err.value)


@pytest.mark.parametrize("display", UNSOURCED)
def test_unsourced_seed_models_are_not_stood_in_for(display):
    # an unsourced model must not silently resolve to a same-family stand-in
    assert find_model(display) is None
