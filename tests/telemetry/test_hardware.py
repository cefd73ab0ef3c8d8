"""The hardware table: rated bandwidth per accelerator, matched from driver-reported names."""

from __future__ import annotations

import pytest

from tokenwatt.telemetry import hardware_table, lookup_accelerator


@pytest.mark.parametrize(
    ("reported", "key", "tbs"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm", 3.35),  # the seed's GPU, as NVML names it
        ("NVIDIA H100 PCIe", "h100-pcie", 2.0),
        ("NVIDIA H100 NVL", "h100-nvl", 3.9),
        ("NVIDIA H200", "h200-sxm", 4.8),
        ("NVIDIA H200 NVL", "h200-nvl", 4.8),
        ("NVIDIA B200", "b200", 8.0),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb", 1.555),
        ("NVIDIA A100-PCIE-40GB", "a100-40gb", 1.555),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm", 2.039),
        ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie", 1.935),
        ("NVIDIA L40S", "l40s", 0.864),
        ("NVIDIA L4", "l4", 0.3),
        ("AMD Instinct MI300X", "mi300x", 5.3),
        ("AMD Instinct MI325X", "mi325x", 6.0),
        ("AMD Instinct MI355X", "mi355x", 8.0),
    ],
)
def test_names_match_rows(reported: str, key: str, tbs: float) -> None:
    row = lookup_accelerator(reported)
    assert row is not None and (row.key, row.rated_bw_tbs) == (key, tbs)


def test_unknown_accelerator() -> None:
    assert lookup_accelerator("Tesla T4") is None
    assert lookup_accelerator("NVIDIA H20") is None  # not an H200


def test_every_row_has_a_source_and_matches_its_own_name() -> None:
    rows = hardware_table()
    assert len({r.key for r in rows}) == len(rows) >= 15
    for row in rows:
        assert row.source.startswith("https://"), row.key
        assert row.vendor in {"NVIDIA", "AMD"}
