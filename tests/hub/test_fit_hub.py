"""`fitprobe fit --hub` through the real huggingface_hub client against the loopback Hub: a listing
of a few hundred generated repos over several pages, concurrent config fetches under a deadline,
the cache offline, and architectures the estimator cannot size reported, never guessed."""
import json
import time

import pytest
from click.testing import CliRunner

from fitprobe.catalogs.hub_list import list_popular
from fitprobe.catalogs.models import load_models
from fitprobe.cli import main

from .hubserver import FakeRepo, listing_repos

SMALL = ("qwen3-0.6b", "qwen2-0.5b-instruct", "llama-3.2-1b-instruct", "gemma-3-1b-it", "qwen3-1.7b")


@pytest.fixture
def listing(hub, monkeypatch, tmp_path):
    monkeypatch.setenv("FITPROBE_CACHE_DIR", str(tmp_path / "fitprobe-cache"))
    configs = {e.name: e.config for e in load_models()}
    for repo in listing_repos(configs, 300):
        hub.add(repo)
    hub.page_size = 40
    return hub


def run(*args, env=None):
    r = CliRunner().invoke(main, list(args), env=env)
    return r.exit_code, r.stdout, r.stderr


def test_listing_follows_the_link_header_across_pages(listing):
    models, label = list_popular(limit=300, search=None, token=None, timeout=30)
    assert len(models) == 300 and len({m.repo_id for m in models}) == 300
    assert [m.downloads for m in models] == sorted((m.downloads for m in models), reverse=True)
    pages = [p for method, p, _ in listing.requests if p.startswith("/api/models?")]
    assert len(pages) == 8 and sum("cursor=" in p for p in pages) == 7
    assert all("pipeline_tag=text-generation" in p for p in pages)
    assert "300 most downloaded" in label


def test_fit_hub_ranks_listed_models_and_names_unsupported(listing):
    configs = {e.name: e.config for e in load_models() if e.name in SMALL}
    listing.repos.clear()
    for repo in listing_repos(configs, 30):
        listing.add(repo)
    listing.add(FakeRepo("weird/novel-arch", "c" * 40, files={"config.json": json.dumps(
        {"model_type": "novel_arch", "hidden_size": 64}).encode()}, tags=["text-generation"],
        downloads=20_000_000, pipeline_tag="text-generation"))
    listing.add(FakeRepo("someone/only-gguf", "d" * 40, files={"README.md": b"x"}, tags=["text-generation"],
                         downloads=15_000_000, pipeline_tag="text-generation"))
    code, out, err = run("fit", "--hub", "--hub-limit", "32", "--gpu", "RTX 4090", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["source"].startswith("Hugging Face Hub")
    ranked = {r["model"] for r in data["rows"]}
    assert len(ranked) == 30 and all(m.startswith("org") for m in ranked)
    unsupported = {u["model"]: u["reason"] for u in data["unsupported"]}
    assert "novel_arch" in unsupported["weird/novel-arch"]
    assert "no config.json" in unsupported["someone/only-gguf"]
    assert all(r["runs"] and r["total_bytes"] > 0 for r in data["rows"])


def test_offline_uses_the_cached_listing_and_says_so(listing, monkeypatch):
    configs = {e.name: e.config for e in load_models() if e.name in SMALL}
    listing.repos.clear()
    for repo in listing_repos(configs, 12):
        listing.add(repo)
    code, online, _ = run("fit", "--hub", "--hub-limit", "12", "--gpu", "RTX 4090", "--json")
    assert code == 0
    listing.stop()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, offline, err = run("fit", "--hub", "--hub-limit", "12", "--gpu", "RTX 4090", "--json")
    assert code == 0, err
    a, b = json.loads(online), json.loads(offline)
    assert b["source"].startswith("cached Hub listing") and "offline" in b["source"]
    assert [r["model"] for r in a["rows"]] == [r["model"] for r in b["rows"]]
    assert any("local Hugging Face cache" in n for n in b["notes"])


def test_offline_without_a_cached_listing_is_one_line(listing, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, out, err = run("fit", "--hub", "--gpu", "RTX 4090")
    assert code == 75 and out == ""  # retry later: the Hub listing is not reachable now
    assert err.count("\n") == 1 and "no Hub listing is cached" in err


def test_configs_past_the_deadline_are_listed_not_guessed(listing):
    configs = {e.name: e.config for e in load_models() if e.name in SMALL}
    listing.repos.clear()
    for repo in listing_repos(configs, 6):
        listing.add(repo)
    listing.info_delay = 30.0  # without the deadline the run would wait this long
    t = time.monotonic()
    code, out, err = run("fit", "--hub", "--hub-limit", "6", "--hub-timeout", "1.5", "--gpu", "RTX 4090", "--json")
    assert time.monotonic() - t < 15
    data = json.loads(out)
    assert data["rows"] == [] and len(data["unsupported"]) == 6
    assert all("deadline" in u["reason"] for u in data["unsupported"])
    assert code == 1
