"""Fixtures for analysis tests: the seed record as v2, and edited copies of it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tokenwatt.records import ReportV2, load_report

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "seed.report.json"


@pytest.fixture(scope="session")
def seed() -> ReportV2:
    """The seed record, migrated to v2."""
    return load_report(SEED)


@pytest.fixture
def seed_with(seed: ReportV2) -> Callable[[Callable[[dict[str, Any]], object]], ReportV2]:
    """The seed record with an edit applied to its JSON form, revalidated."""

    def make(change: Callable[[dict[str, Any]], object]) -> ReportV2:
        data = json.loads(seed.model_dump_json())
        change(data)
        return ReportV2.model_validate(data)

    return make
