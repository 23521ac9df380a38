"""Dated cloud GPU offers (catalogs/data/cloud_prices.json), validated at load against the GPU catalog."""
from __future__ import annotations

from functools import lru_cache

from fitprobe.estimator.fields import doc, record
from fitprobe.catalogs.validated import load_json_file

from . import data_path
from .gpus import load_gpus


@record
class CloudOffer:
    provider: str
    instance: str
    gpu_key: str
    gpu_count: int = doc(gt=0)
    price_per_hour_usd: float = doc(gt=0, description="the whole instance, USD per hour")
    price_per_hour_usd_max: float | None = None
    billing: str | None = None
    tier: str
    date_checked: str
    source: str
    notes: str = ""


@lru_cache(maxsize=1)
def load_offers() -> tuple[CloudOffer, ...]:
    offers = tuple(load_json_file(list[CloudOffer], data_path("cloud_prices.json"), key="offers"))
    keys = {g.key for g in load_gpus()}
    unknown = sorted({o.gpu_key for o in offers} - keys)
    if unknown:
        raise ValueError(f"cloud_prices.json names GPUs missing from gpus.json: {', '.join(unknown)}")
    return offers
