"""Popular text-generation models from the Hugging Face Hub, for `fitprobe fit --hub`.

The listing is huggingface_hub's `list_models` (pipeline_tag=text-generation, sorted by downloads;
it follows the Hub's `Link: rel="next"` pages). Each repo's config comes through `hub.fetch_model`
(the HF cache serves it offline), several at once, all within one deadline. The listing itself is
kept in fitprobe's cache dir, so an offline run ranks the last listing seen and says so. Models
whose architecture the estimator cannot size are reported as unsupported, never guessed.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from fitprobe.catalogs.validated import cache_dir
from fitprobe.errors import message_of
from fitprobe.estimator.message import Num, msg, plural

WORKERS = 8  # concurrent config fetches
PIPELINE = "text-generation"


class HubListError(RuntimeError):
    """No listing: the Hub did not answer and nothing is cached (one line, for the CLI)."""


@dataclass
class Listed:
    repo_id: str
    downloads: int = 0
    likes: int = 0
    tags: list[str] = field(default_factory=list)


@dataclass
class HubSubjects:
    subjects: list  # fitprobe.fitting.Subject
    label: str  # where the listing came from, for the output's `source`
    notes: list[str] = field(default_factory=list)


def _listing_path(endpoint: str, search: str | None, limit: int):
    key = hashlib.sha1(f"{endpoint}|{PIPELINE}|{search or ''}|{limit}".encode()).hexdigest()[:16]
    return cache_dir() / "hub-listing" / f"{key}.json"


def list_popular(*, limit: int, search: str | None, token: str | None, timeout: float) -> tuple[list[Listed], str]:
    """(models, how they were obtained): the Hub's listing, or the cached one when offline/unreachable."""
    from . import hub

    endpoint = hub._endpoint()
    path = _listing_path(endpoint, search, limit)
    if hub._offline():
        return _cached(path, msg("offline mode (HF_HUB_OFFLINE)"))
    try:
        models = _call_with_deadline(lambda: _fetch_listing(endpoint, limit, search, token), timeout)
    except Exception as exc:  # noqa: BLE001 - unreachable, HTTP error, deadline: fall back to the cache
        why = (message_of(hub._translate(exc, "the model listing", None, token) or exc)
               if not isinstance(exc, TimeoutError)
               else msg("the Hub listing did not answer within %(seconds)s s", seconds=Num(timeout, "g")))
        return _cached(path, why)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"fetched_at": _now(), "endpoint": endpoint,
                                    "models": [m.__dict__ for m in models]}))
    except OSError:
        pass  # read-only cache: the next offline run will say there is no listing
    return models, msg("Hugging Face Hub (%(endpoint)s): %(n)s most downloaded %(pipeline)s models", endpoint=endpoint,
                       n=len(models), pipeline=PIPELINE)


def _fetch_listing(endpoint: str, limit: int, search: str | None, token: str | None) -> list[Listed]:
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint, token=token, library_name="fitprobe")
    found = api.list_models(pipeline_tag=PIPELINE, sort="downloads", limit=limit, search=search)
    return [Listed(repo_id=m.id, downloads=m.downloads or 0, likes=m.likes or 0, tags=list(m.tags or []))
            for m in found]


def _cached(path, why: str) -> tuple[list[Listed], str]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        raise HubListError(msg("%(why)s, and no Hub listing is cached yet (run once online)", why=why)) from None
    models = [Listed(**m) for m in data.get("models", [])]
    return models, msg("cached Hub listing of %(date)s (%(why)s)", date=data.get("fetched_at", "?"), why=why)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _call_with_deadline(fn, timeout: float):
    """fn() in a daemon thread; TimeoutError after `timeout` s (the thread is abandoned, never joined)."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise TimeoutError
    if "error" in box:
        raise box["error"]
    return box["value"]


def fetch_configs(repo_ids: list[str], *, token: str | None, deadline: float) -> dict[str, object]:
    """repo id -> HubModel or the exception that stopped it; repos not done by `deadline`
    (time.monotonic()) map to TimeoutError. At most WORKERS fetches run at once."""
    from . import hub

    results: dict[str, object] = {}
    lock = threading.Lock()
    queue = list(repo_ids)

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                repo = queue.pop(0)
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                value = hub.fetch_model(repo, token=token, timeout=max(1.0, min(left, hub.DEFAULT_TIMEOUT)))
            except Exception as exc:  # noqa: BLE001 - reported per model
                value = exc
            with lock:
                results[repo] = value

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(WORKERS, len(repo_ids)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    with lock:
        return {r: results.get(r, TimeoutError()) for r in repo_ids}


def hub_subjects(*, limit: int, search: str | None, token: str | None, timeout: float) -> HubSubjects:
    """The listing turned into subjects to size: facts from each config, or why it cannot be sized."""
    from fitprobe.catalogs.quants import quant_table
    from fitprobe.estimator.config import SpecError, spec_from_config
    from fitprobe.estimator.fit import ModelFacts, published_format
    from fitprobe.fitting import Subject, with_vision

    from . import hub

    start = time.monotonic()
    models, label = list_popular(limit=limit, search=search, token=token, timeout=timeout)
    fetched = fetch_configs([m.repo_id for m in models], token=token, deadline=start + timeout)
    subjects, late, cached = [], 0, 0
    for m in models:
        got = fetched[m.repo_id]
        if isinstance(got, TimeoutError):
            late += 1
            subjects.append(Subject(m.repo_id, unsupported=msg("config not fetched within the %(seconds)s s deadline",
                                                                seconds=Num(timeout, "g"))))
            continue
        if isinstance(got, Exception):
            reason = message_of(got) if isinstance(got, hub.HubError) else f"{type(got).__name__}: {got}"
            subjects.append(Subject(m.repo_id, unsupported=reason))
            continue
        if got.config is None:
            subjects.append(Subject(m.repo_id, unsupported=msg("no config.json (GGUF-only repo)") if got.gguf_files
                                    else msg("no config.json (params.json or nothing)")))
            continue
        cached += got.source == "cache"
        try:
            spec = spec_from_config(got.config, name=m.repo_id, hf_id=m.repo_id)
        except SpecError as exc:
            subjects.append(Subject(m.repo_id, unsupported=message_of(exc)))
            continue
        tags = ["chat"] if "conversational" in m.tags else []
        facts = ModelFacts(name=m.repo_id, spec=spec, family=spec.architecture, tags=tags, hf_id=m.repo_id,
                           native=published_format(spec, quant_table()))
        subjects.append(Subject(m.repo_id, facts=with_vision(facts)))
    notes = [msg("models from %(source)s", source=label)]
    if cached:
        notes.append(plural("%(n)s config read from the local Hugging Face cache",
                            "%(n)s configs read from the local Hugging Face cache", cached))
    if late:
        notes.append(plural("%(n)s config not fetched within --hub-timeout %(seconds)s s: listed as not sized",
                            "%(n)s configs not fetched within --hub-timeout %(seconds)s s: listed as not sized", late,
                            seconds=Num(timeout, "g")))
    return HubSubjects(subjects=subjects, label=label, notes=notes)
