"""Catalog data and the resolvers that turn a name into specs."""
from pathlib import Path

DATA_DIR = Path(__file__).parent / "data"


def data_path(name: str) -> Path:
    """A bundled data file (JSON with a source per entry)."""
    return DATA_DIR / name
