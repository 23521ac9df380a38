"""What running the model costs: cloud price per 1M output tokens, and renting vs buying.

    USD per 1M output tokens = price per hour / (aggregate tokens/s × 3600) × 10^6
    electricity per month    = TDP (W) × devices × hours/day × days/month / 1000 × USD/kWh
    months to amortize       = hardware price / (rent per month − electricity per month)
TDP is the board's maximum power, so electricity is an upper bound. Rent per month is the
cheapest cloud offer that fits, for the same hours of use. Defaults are options (CostOptions).
"""
from __future__ import annotations

from fitprobe.estimator.fields import doc, record
from fitprobe.estimator.message import msg

DAYS_PER_MONTH = 365.25 / 12


@record
class CostOptions:
    hours_per_day: float = doc(default=4.0, gt=0, le=24, description="hours of use per day (the seed pages' default)")
    electricity_usd_per_kwh: float = doc(default=0.15, ge=0, description="electricity price; an assumption, set yours")
    hardware_price_usd: float | None = doc(default=None, ge=0,
                                             description="purchase price; default: catalog price × device count")


@record
class OfferCost:
    provider: str
    instance: str
    gpu_key: str
    gpu_count: int
    tier: str
    price_per_hour_usd: float
    date_checked: str
    source: str
    status: str = doc(description="fits | tight | exceeds for the model on this instance")
    aggregate_tps: float | None = None
    usd_per_million_tokens: float | None = doc(default=None, description="output tokens at the plan's concurrency")
    monthly_usd: float = doc(description="price at the chosen hours per day")


@record
class RentVsBuy:
    hardware_price_usd: float | None
    price_basis: str
    tdp_w: float | None
    hours_per_day: float
    electricity_usd_per_kwh: float
    electricity_monthly_usd: float | None
    rent_instance: str | None
    rent_monthly_usd: float | None
    months_to_amortize: float | None
    local_usd_per_million_tokens: float | None = doc(default=None, description="electricity only")
    note: str = ""


@record
class Cost:
    offers: list[OfferCost]
    cheapest: OfferCost | None
    rent_vs_buy: RentVsBuy
    options: CostOptions


def usd_per_million(price_per_hour: float, tokens_per_s: float) -> float:
    return price_per_hour / (tokens_per_s * 3600) * 1e6


def electricity_monthly(tdp_w: float, devices: int, hours_per_day: float, usd_per_kwh: float) -> float:
    return tdp_w * devices * hours_per_day * DAYS_PER_MONTH / 1000 * usd_per_kwh


def months_to_amortize(price: float, rent_monthly: float, electricity: float) -> float | None:
    """None when renting costs no more than the electricity of owning: buying never pays back."""
    saving = rent_monthly - electricity
    return price / saving if saving > 0 else None


def cheapest(offers: list[OfferCost]) -> OfferCost | None:
    """The fitting offer with the lowest cost per token (lowest hourly price if no speed is known)."""
    ok = [o for o in offers if o.status != "exceeds"]
    if not ok:
        return None
    return min(ok, key=lambda o: (o.usd_per_million_tokens is None, o.usd_per_million_tokens or 0, o.price_per_hour_usd))


def rent_vs_buy(opts: CostOptions, *, catalog_price: float | None, price_basis: str, tdp_w: float | None,
                devices: int, best: OfferCost | None, local_tps: float | None) -> RentVsBuy:
    price = opts.hardware_price_usd if opts.hardware_price_usd is not None else (
        catalog_price * devices if catalog_price else None)
    basis = (msg("given") if opts.hardware_price_usd is not None else (price_basis or msg("catalog")) if price
             else msg("unknown"))
    elec = electricity_monthly(tdp_w, devices, opts.hours_per_day, opts.electricity_usd_per_kwh) if tdp_w else None
    rent = best.price_per_hour_usd * opts.hours_per_day * DAYS_PER_MONTH if best else None
    months = months_to_amortize(price, rent, elec or 0.0) if price and rent else None
    local = None
    if tdp_w and local_tps:
        local = usd_per_million(tdp_w * devices / 1000 * opts.electricity_usd_per_kwh, local_tps)
    notes = []
    if price is None:
        notes.append(msg("no purchase price known: pass --hardware-price"))
    if best is None:
        notes.append(msg("no cloud offer in the price catalog fits this model"))
    if rent and elec is not None and months is None:
        notes.append(msg("renting costs less than the electricity of owning at these hours"))
    return RentVsBuy(hardware_price_usd=price, price_basis=basis, tdp_w=tdp_w, hours_per_day=opts.hours_per_day,
                     electricity_usd_per_kwh=opts.electricity_usd_per_kwh, electricity_monthly_usd=elec,
                     rent_instance=f"{best.provider} {best.instance}" if best else None, rent_monthly_usd=rent,
                     months_to_amortize=months, local_usd_per_million_tokens=local, note="; ".join(notes))
