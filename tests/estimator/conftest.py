import pytest

from fitprobe.catalogs.models import find_model
from fitprobe.catalogs.quants import quant_table
from fitprobe.estimator.config import spec_from_config


@pytest.fixture(scope="session")
def table():
    return quant_table()


@pytest.fixture(scope="session")
def spec_of():
    def make(name: str):
        entry = find_model(name)
        assert entry is not None, name
        return spec_from_config(entry.config, name=entry.name, hf_id=entry.hf_id)

    return make
