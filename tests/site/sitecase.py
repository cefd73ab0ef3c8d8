"""Helpers for the site tests: the seed record, hostile and rich variants of it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SEED_RECORD = REPO / "reports" / "lab-h100-qwen3-30b-a3b-kv-cache.json"
HOSTILE = "<img src=x onerror=alert(1)>"
MARKDOWN_TRAP = "**x** | [a](b)"
BIDI_AND_CONTROLS = ["unclosed \u202eoverride", "nul\x00 esc\x1b[31m red"]
"""An unclosed right-to-left override (it would reverse what follows it on the line) and
NUL / ESC bytes (which must never reach the HTML)."""


def seed_data() -> dict[str, Any]:
    """The archive's first record (v2) as a dict."""
    data: dict[str, Any] = json.loads(SEED_RECORD.read_text(encoding="utf-8"))
    return data


def hostile_data() -> dict[str, Any]:
    """The seed with record text that tries to become HTML or Markdown everywhere."""
    data = seed_data()
    data["id"] = "hostile-labels"
    data["title"] = f"{HOSTILE} {MARKDOWN_TRAP}"
    data["summary"] = f"1. {HOSTILE}\n# not a heading {MARKDOWN_TRAP} {{{{ 7*7 }}}}"
    data["configs"][1]["label"] = HOSTILE
    data["configs"][0]["label"] = MARKDOWN_TRAP
    data["configs"][1]["engine"] = "</script><script>alert(2)</script>"
    data["not_covered"] = [HOSTILE, MARKDOWN_TRAP, "```\n<b>fence</b>", *BIDI_AND_CONTROLS]
    data["updates"][0]["text"] = f"{HOSTILE} {MARKDOWN_TRAP}"
    data["reproduce"] = "echo '```'\n</code></pre><img src=x onerror=alert(3)>"
    data["hardware"]["host"] = '!!! danger "x"'
    return data


def rich_data() -> dict[str, Any]:
    """A v2 record with sweep probes, a power timeline and an MBU breakdown."""
    data = seed_data()
    data["id"] = "rich-v2-detail"
    data["title"] = "Rich v2 record"
    data["published"] = "2026-11-01"
    data["status"] = "published"
    for i, cfg in enumerate(data["configs"]):
        cfg["sweep"] = [
            {"rate_rps": 2.0, "slo_pass": True, "ttft_p99_ms": 120.0, "tpot_p99_ms": 20.0},
            {"rate_rps": 8.0, "slo_pass": True, "ttft_p99_ms": 300.0, "tpot_p99_ms": 40.0},
            {
                "rate_rps": 16.0,
                "slo_pass": False,
                "ttft_p99_ms": 32000.0 if i == 0 else 900.0,
                "tpot_p99_ms": 48.0 if i == 0 else 61.0,
                "failure_reason": "ttft" if i == 0 else "tpot",
            },
        ]
        cfg["power_timeline"] = [
            {"t_s": float(t), "power_w": 600.0 + 10 * (t % 3), "throttle": ["sw_power_cap"]}
            if t % 2
            else {"t_s": float(t), "power_w": 590.0}
            for t in range(6)
        ]
        cfg["mbu_breakdown"] = {"weights_gbs": 1000.0, "kv_gbs": 940.0 if i == 0 else 525.0}
        cfg["accuracy"].update(items=600, seeds=3)
    data["configs"][1]["accuracy"].update(ci_low_pts=-5.9, ci_high_pts=-2.1, mcnemar_p=0.00012)
    return data


def write_record(folder: Path, data: dict[str, Any], name: str | None = None) -> Path:
    """Write ``data`` as ``folder/<id>.json`` (or ``name``)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"{data['id']}.json")
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, with its bytes."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def deep(data: dict[str, Any]) -> dict[str, Any]:
    """A deep copy (tests change records freely)."""
    return copy.deepcopy(data)
