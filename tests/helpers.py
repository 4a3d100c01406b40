"""Plain helpers the test modules share (paths, peer-data lookup, small hand-made inputs); imported as
`from helpers import X`. Fixtures live only in tests/conftest.py; workflow runs in tests/workflow_utils.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("HALLUFLOW_SHARED", REPO.parent / "shared"))
SHARED_DATA = SHARED / "data"


def shared_data(*parts: str) -> Path:
    """Path under ../shared/data; skips the test when the peer data is not beside the clone."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"peer data {path} not present (clone ../shared beside the repo to run conformance tests)")
    return path
