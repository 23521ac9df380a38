"""Shared fixtures for the probe tests."""
import json

import pytest
from probe_fixtures import FIXTURES


@pytest.fixture
def catalog() -> list[dict]:
    return json.loads((FIXTURES / "gpus_catalog_sample.json").read_text())
