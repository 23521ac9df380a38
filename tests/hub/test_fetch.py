"""fetch_model / find_gguf_repos against the loopback Hub, through the real huggingface_hub client."""

from __future__ import annotations

import json
import logging
import os

import pytest

from fitprobe.catalogs.hub import (
    Lookup,
    HubAuthError,
    HubMalformedFile,
    HubNotFound,
    HubTimeout,
    HubUnavailable,
    fetch_model,
    find_gguf_repos,
    parse_model_ref,
)

from .conftest import SHA_A, SHA_B, fixture_bytes, listing_repo, safetensors_bytes
from .hubserver import FakeRepo, Fault

QWEN = "Qwen/Qwen3-0.6B"
LLAMA = "meta-llama/Llama-3.1-8B"
TOKEN = "hf_loopbackSECRETtoken0123456789"


def qwen(hub, **kw) -> FakeRepo:
    # The safetensors counts are a test value for the model-info field (the real repo's
    # count is not recorded in the fixtures); the config is the real one.
    return hub.add(FakeRepo(QWEN, SHA_A, files={"config.json": fixture_bytes("qwen3-0.6b.config.json"),
                                                "model.safetensors": safetensors_bytes({"w": ("BF16", [4, 4])})},
                            safetensors={"parameters": {"BF16": 751632384}, "total": 751632384}, **kw))


def test_success_reads_config_sha_and_model_info_counts(hub):
    qwen(hub)
    m = fetch_model(QWEN)
    assert m.source == "hub" and m.sha == SHA_A and m.revision == "main"
    assert m.config == json.loads(fixture_bytes("qwen3-0.6b.config.json"))
    assert m.config_file == "config.json" and m.quantization_config is None
    assert m.safetensors_params == {"BF16": 751632384} and m.safetensors_source == "model-info"
    assert m.gguf_files == []
    # No weight bytes were requested: only model info and the config's HEAD/GET.
    assert not [p for meth, p, _ in hub.requests if meth == "GET" and p.endswith(".safetensors")]


def test_revision_is_passed_to_model_info_and_resolve(hub):
    repo = qwen(hub)
    repo.revisions["v1"] = SHA_B
    m = fetch_model(parse_model_ref(f"{QWEN}@v1"))
    assert m.sha == SHA_B and m.revision == "v1"
    paths = [p for _, p, _ in hub.requests]
    assert any(p.startswith(f"/api/models/{QWEN}/revision/v1") for p in paths)
    assert any(p == f"/{QWEN}/resolve/v1/config.json" for p in paths)


def test_safetensors_counts_from_header_range_reads(hub):
    shard1 = safetensors_bytes({"embed": ("BF16", [16, 8]), "layer.w": ("F8_E4M3", [8, 8]), "scale": ("F32", [8])})
    shard2 = safetensors_bytes({"lm_head": ("BF16", [16, 8])})
    index = {"metadata": {"total_size": 0}, "weight_map": {
        "embed": "model-00001-of-00002.safetensors", "layer.w": "model-00001-of-00002.safetensors",
        "scale": "model-00001-of-00002.safetensors", "lm_head": "model-00002-of-00002.safetensors"}}
    hub.add(FakeRepo(QWEN, SHA_A, files={
        "config.json": fixture_bytes("qwen3-0.6b.config.json"),
        "model.safetensors.index.json": json.dumps(index).encode(),
        "model-00001-of-00002.safetensors": shard1, "model-00002-of-00002.safetensors": shard2}))
    m = fetch_model(QWEN)
    assert m.safetensors_source == "headers"
    assert m.safetensors_params == {"BF16": 256, "F8_E4M3": 64, "F32": 8}
    weight_gets = [h for meth, p, h in hub.requests if meth == "GET" and p.endswith(".safetensors")]
    assert weight_gets and all("range" in {k.lower() for k in h} for h in weight_gets)


def test_gguf_repo_lists_split_quants_with_sizes(hub):
    hub.add(listing_repo("unsloth/DeepSeek-R1-GGUF"))
    m = fetch_model("unsloth/DeepSeek-R1-GGUF:Q4_K_M")
    (q,) = m.gguf_files
    listing = json.loads(fixture_bytes("gguf_listings.json"))["repos"]["unsloth/DeepSeek-R1-GGUF"]["files"]
    assert q.quant == "Q4_K_M" and q.complete and len(q.filenames) == 9
    assert q.size_bytes == sum(f["size"] for f in listing)
    assert m.config is None and m.sha == "5bd2e6a771836db3054222ab8ea29bf1e22d2cb5"


def test_tree_listing_supplies_sizes_when_model_info_has_none(hub):
    hub.add(listing_repo("unsloth/GLM-4.5-Air-GGUF", sizes_in_info=False))
    m = fetch_model("unsloth/GLM-4.5-Air-GGUF")
    (q,) = m.gguf_files
    assert q.quant == "Q8_0" and q.size_bytes == 3 * 10_000_000_000 + 0 + 1 + 2
    assert any("/tree/" in p for _, p, _ in hub.requests)


def test_multimodal_config_is_kept_whole_and_params_json_only_repo(hub):
    hub.add(FakeRepo("google/gemma-3-4b-it", SHA_A, files={"config.json": fixture_bytes("gemma-3-4b-it.config.json")}))
    hub.add(FakeRepo("mistralai/Mistral-7B-Instruct-v0.3", SHA_B,
                     files={"params.json": fixture_bytes("mistral-7b-instruct-v0.3.params.json")}))
    g = fetch_model("google/gemma-3-4b-it")
    assert g.config["text_config"]["num_hidden_layers"] == 34 and "vision_config" in g.config
    mi = fetch_model("mistralai/Mistral-7B-Instruct-v0.3")
    assert mi.config is None and mi.params_json["n_kv_heads"] == 8
    assert any("params.json" in n for n in mi.notes)


def test_gated_without_token_says_licence_and_how_to_pass_a_token(hub):
    hub.add(FakeRepo(LLAMA, SHA_A, gated=True, files={"config.json": fixture_bytes("llama-3.1-8b.config.json")}))
    with pytest.raises(HubAuthError) as e:
        fetch_model(LLAMA)
    msg = str(e.value)
    assert LLAMA in msg and "licence" in msg and "HF_TOKEN" in msg and "--token" in msg and "\n" not in msg


def test_gated_with_unaccepted_token_403_never_leaks_the_token(hub, caplog):
    hub.add(FakeRepo(LLAMA, SHA_A, gated=True, files={"config.json": fixture_bytes("llama-3.1-8b.config.json")}))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(HubAuthError) as e:
        fetch_model(LLAMA, token=TOKEN)
    assert "no access" in str(e.value) and LLAMA in str(e.value)
    assert TOKEN not in str(e.value) and TOKEN not in repr(e.value) and TOKEN not in caplog.text
    assert e.value.__cause__ is None and e.value.__suppress_context__


def test_gated_with_accepted_token_succeeds(hub):
    hub.add(FakeRepo(LLAMA, SHA_A, gated=True, files={"config.json": fixture_bytes("llama-3.1-8b.config.json")}))
    hub.accepted_tokens.add(TOKEN)
    m = fetch_model(LLAMA, token=TOKEN)
    assert m.gated and m.config["num_key_value_heads"] == 8
    assert TOKEN not in repr(m)
    sent = [h for _, p, h in hub.requests if "/resolve/" in p]
    assert sent and all(h.get("authorization") == f"Bearer {TOKEN}" for h in sent)


def test_token_from_env_is_used(hub, monkeypatch):
    hub.add(FakeRepo(LLAMA, SHA_A, gated=True, files={"config.json": fixture_bytes("llama-3.1-8b.config.json")}))
    hub.accepted_tokens.add(TOKEN)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert fetch_model(LLAMA).config["model_type"] == "llama"


def test_the_client_itself_finds_the_cached_config(hub):
    """config.json lands in the Hub cache in the client's own layout: hf_hub_download finds it offline."""
    from huggingface_hub import hf_hub_download

    repo = qwen(hub)
    fetch_model(QWEN)
    fetch_model(QWEN)  # a second lookup replaces the snapshot's link in place
    repo.revisions["v1"] = SHA_A
    fetch_model(f"{QWEN}@v1")
    for rev in (None, "v1", SHA_A):
        path = hf_hub_download(QWEN, "config.json", revision=rev, local_files_only=True,
                               cache_dir=os.path.join(os.environ["HF_HOME"], "hub"))
        assert json.loads(open(path, "rb").read()) == json.loads(fixture_bytes("qwen3-0.6b.config.json"))
        assert f"snapshots{os.sep}{SHA_A}" in path


def test_a_stored_token_is_used_as_the_client_would(hub, monkeypatch, tmp_path):
    """No token passed, none in the environment: the client's own get_token() reads the stored token
    file (`hf auth login`), unless implicit tokens are switched off."""
    from huggingface_hub import constants

    hub.add(FakeRepo(LLAMA, SHA_A, gated=True, files={"config.json": fixture_bytes("llama-3.1-8b.config.json")}))
    hub.accepted_tokens.add(TOKEN)
    stored = tmp_path / "token"
    stored.write_text(TOKEN + "\n")
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(stored))
    assert fetch_model(LLAMA).config["model_type"] == "llama"
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", True)
    with pytest.raises(HubAuthError):
        fetch_model(LLAMA)


def test_missing_repo_and_missing_revision(hub):
    qwen(hub)
    with pytest.raises(HubNotFound) as e:
        fetch_model("nobody/no-such-model")
    assert "nobody/no-such-model" in str(e.value) and "HF_TOKEN" in str(e.value)  # anonymous 401 hint
    with pytest.raises(HubNotFound) as e:
        fetch_model("nobody/no-such-model", token=TOKEN)
    assert "not found" in str(e.value) and TOKEN not in str(e.value)
    with pytest.raises(HubNotFound) as e:
        fetch_model(f"{QWEN}@no-such-branch")
    assert "revision 'no-such-branch'" in str(e.value)


def test_timeout_cold_cache_raises_hub_timeout(hub):
    qwen(hub)
    hub.faults.append(Fault(path=".", delay=5.0))  # every route; the fixture's teardown wakes the handlers
    with pytest.raises(HubTimeout) as e:
        fetch_model(QWEN, lookup=Lookup(timeout=0.2))
    assert isinstance(e.value, HubUnavailable) and "did not answer within 0.2 s" in str(e.value)


def test_timeout_with_warm_cache_falls_back_to_cache(hub):
    qwen(hub)
    fetch_model(QWEN)
    hub.info_delay = 5.0
    m = fetch_model(QWEN, lookup=Lookup(timeout=0.2))
    assert m.source == "cache" and m.config["hidden_size"] == 1024
    assert any("did not answer within 0.2 s" in n for n in m.notes)


def test_malformed_config_is_a_one_line_error(hub):
    hub.add(FakeRepo("org/broken", SHA_A, files={"config.json": b'{"model_type": "llama", "hidden_size": 4096,,}'}))
    with pytest.raises(HubMalformedFile) as e:
        fetch_model("org/broken")
    assert "config.json of org/broken is not valid JSON" in str(e.value) and "\n" not in str(e.value)


def test_renamed_repo_redirect_is_followed(hub):
    qwen(hub)
    hub.renamed["qwen/qwen3-0.6b-old"] = QWEN
    m = fetch_model("Qwen/Qwen3-0.6B-old")
    assert m.repo_id == QWEN and m.config["model_type"] == "qwen3"
    assert any("renamed" in n for n in m.notes)
    assert any(p.startswith("/api/models/Qwen/Qwen3-0.6B-old") for _, p, _ in hub.requests)


def test_offline_with_warm_cache_uses_it_without_any_request(hub, monkeypatch):
    qwen(hub)
    online = fetch_model(QWEN)
    hub.requests.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    m = fetch_model(QWEN)
    assert hub.requests == []
    assert m.source == "cache" and m.sha == online.sha and m.config == online.config
    assert any("HF_HUB_OFFLINE" in n for n in m.notes)


def test_offline_with_cold_cache_raises_hub_unavailable(hub, monkeypatch):
    qwen(hub)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailable) as e:
        fetch_model(QWEN)
    assert "not in the cache" in str(e.value) and hub.requests == []


def test_no_network_warm_and_cold(hub, monkeypatch):
    qwen(hub)
    fetch_model(QWEN)
    hub.stop()  # nothing listens on the port any more
    assert fetch_model(QWEN).source == "cache"
    with pytest.raises(HubUnavailable) as e:
        fetch_model("org/never-fetched")
    assert "cannot reach" in str(e.value)


def test_find_gguf_repos_by_base_model_tag_then_by_name(hub):
    hub.add(FakeRepo("unsloth/Qwen3-0.6B-GGUF", SHA_A, tags=["gguf", f"base_model:quantized:{QWEN}"], downloads=50))
    hub.add(FakeRepo("bartowski/Qwen_Qwen3-0.6B-GGUF", SHA_B, tags=["gguf", f"base_model:quantized:{QWEN}"],
                     downloads=90))
    hub.add(FakeRepo("someone/Llama-3.1-8B-GGUF", SHA_B, tags=["gguf"], downloads=5))
    found = find_gguf_repos(QWEN)
    assert [c.repo_id for c in found] == ["bartowski/Qwen_Qwen3-0.6B-GGUF", "unsloth/Qwen3-0.6B-GGUF"]
    assert {c.match for c in found} == {"base_model"}
    by_name = find_gguf_repos(LLAMA)
    assert [(c.repo_id, c.match) for c in by_name] == [("someone/Llama-3.1-8B-GGUF", "name")]


def test_modelopt_side_file_becomes_quantization_config(hub):
    # hf_quant_config.json layout as vLLM's ModelOptFp4Config.from_config documents it:
    # {"producer": {...}, "quantization": {"quant_algo": "NVFP4", ...}}; config.json has no quantization_config.
    side = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "exclude_modules": ["lm_head"]}}
    hub.add(FakeRepo("org/nvfp4", SHA_A, files={"config.json": fixture_bytes("qwen3-0.6b.config.json"),
                                                 "hf_quant_config.json": json.dumps(side).encode()}))
    m = fetch_model("org/nvfp4")
    assert m.quantization_config == {"quant_method": "modelopt", "quant_algo": "NVFP4",
                                     "exclude_modules": ["lm_head"], "producer": {"name": "modelopt"}}
    assert any("hf_quant_config.json" in n for n in m.notes)
