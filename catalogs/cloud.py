"""Dated cloud GPU offers (catalogs/data/cloud_prices.json), validated at load against the GPU catalog."""
from __future__ import annotations

import json
from functools import lru_cache

from pydantic import BaseModel, Field

from . import data_path
from .gpus import load_gpus


class CloudOffer(BaseModel):
    provider: str
    instance: str
    gpu_key: str
    gpu_count: int = Field(gt=0)
    price_per_hour_usd: float = Field(gt=0, description="the whole instance, USD per hour")
    price_per_hour_usd_max: float | None = None
    billing: str | None = None
    tier: str
    date_checked: str
    source: str
    notes: str = ""


@lru_cache(maxsize=1)
def load_offers() -> tuple[CloudOffer, ...]:
    offers = tuple(CloudOffer.model_validate(o) for o in json.loads(data_path("cloud_prices.json").read_text())["offers"])
    keys = {g.key for g in load_gpus()}
    unknown = sorted({o.gpu_key for o in offers} - keys)
    if unknown:
        raise ValueError(f"cloud_prices.json names GPUs missing from gpus.json: {', '.join(unknown)}")
    return offers
