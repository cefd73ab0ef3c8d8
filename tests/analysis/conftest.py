"""Fixtures for analysis tests: the seed record as the newest version, and edited copies."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tokenwatt.records import ReportV3, load_report

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "seed.report.json"


@pytest.fixture(scope="session")
def seed() -> ReportV3:
    """The seed record, migrated to the newest version (v3)."""
    return load_report(SEED)


@pytest.fixture
def seed_with(seed: ReportV3) -> Callable[[Callable[[dict[str, Any]], object]], ReportV3]:
    """The seed record with an edit applied to its JSON form, revalidated."""

    def make(change: Callable[[dict[str, Any]], object]) -> ReportV3:
        data = json.loads(seed.model_dump_json())
        change(data)
        return ReportV3.model_validate(data)

    return make
