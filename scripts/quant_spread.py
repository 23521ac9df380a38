#!/usr/bin/env python3
"""Published quant files against the formula: how far each approximate format's size falls short.

Sets every published file in catalogs/data/quant_formats.json beside fitprobe's size of the same model
in the same format and prints the excess (file / estimate - 1; positive = the formula is short, the
unsafe direction). `--write` stores them in catalogs/data/quant_spread.json, which widens the verdict's
error band for formats sized approximately (estimator/spread.py). Rerun it after changing a recipe or
adding a published file: tests/estimator/test_quant_spread.py fails until the stored figures match.

    python scripts/quant_spread.py [--write]
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import date

from fitprobe.catalogs import data_path
from fitprobe.catalogs.models import find_model
from fitprobe.catalogs.quants import quant_table
from fitprobe.estimator.config import spec_from_config
from fitprobe.estimator.fields import asdict
from fitprobe.estimator.spread import measure


def published_specs(table) -> dict:
    specs = {}
    for fmt in table.formats:
        for pub in fmt.published:
            if pub.model not in specs:
                entry = find_model(pub.model)
                specs[pub.model] = spec_from_config(entry.config, name=entry.name)
    return specs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="store the figures in catalogs/data/quant_spread.json")
    args = ap.parse_args(argv)
    table = quant_table()
    files = measure(table, published_specs(table))
    print(f"{'format':<12}{'model':<34}{'family':<12}{'file GiB':>10}{'formula':>10}{'excess':>9}")
    for m in files:
        print(f"{m.format:<12}{m.model:<34}{m.family:<12}{m.published_gib:>10.2f}{m.estimate_gib:>10.2f}{m.excess:>+9.1%}")
    if args.write:
        path = data_path("quant_spread.json")
        path.write_text(json.dumps({
            "schema": 1,
            "source": "scripts/quant_spread.py: each published file of catalogs/data/quant_formats.json (published_gib, "
                      "with its source) beside fitprobe's weight_bytes(...).total of the same model and format "
                      "(estimate_gib); estimator/spread.py turns the excess into the error band of formats sized "
                      "approximately",
            "measured_on": date.today().isoformat(),
            "files": [asdict(m) for m in files],
        }, indent=1) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
