"""The seed report record: validates unchanged, migrates, and agrees with the archive copies."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tokenwatt.records import (
    ReportV1,
    ReportV2,
    ReportV3,
    fingerprint,
    load_report,
    load_spec,
    parse_report,
    read_json,
    v1_to_v2,
    v2_to_v3,
)

SEED_NAME = "lab-h100-qwen3-30b-a3b-kv-cache"


@pytest.fixture(scope="module")
def seed_file(repo_root: Path) -> Path:
    return repo_root / "tests" / "fixtures" / "seed.report.json"


@pytest.fixture(scope="module")
def seed_v1(seed_file: Path) -> ReportV1:
    report = parse_report(read_json(seed_file), str(seed_file))
    assert isinstance(report, ReportV1)
    return report


SEED_SHA256 = "454004427b155c77691118841bd4d50059ed5626a2b67ba550361508c0d1f6a0"
"""SHA-256 of the seed report as the project received it (hashed when it was copied in)."""


def test_fixture_is_the_seed_byte_for_byte(seed_file: Path) -> None:
    assert hashlib.sha256(seed_file.read_bytes()).hexdigest() == SEED_SHA256


@pytest.mark.shared
def test_fixture_is_byte_identical_to_the_shared_seed(seed_file: Path, shared_dir: Path) -> None:
    original = shared_dir / "seeds" / f"{SEED_NAME}.report.json"
    assert seed_file.read_bytes() == original.read_bytes()


def test_seed_validates_unchanged_as_version_1(seed_file: Path, seed_v1: ReportV1) -> None:
    raw = json.loads(seed_file.read_text(encoding="utf-8"))
    assert "schema_version" not in raw  # no version means version 1
    assert type(seed_v1) is ReportV1
    # Every field of the file is kept: dumping without defaults gives the file's content back.
    dumped = seed_v1.model_dump(mode="json", exclude_unset=True)
    assert dumped == raw


def test_seed_values_survive_validation(seed_v1: ReportV1) -> None:
    base, tuned = seed_v1.configs
    assert (base.key, tuned.key) == ("baseline", "tuned")
    assert base.goodput_tok_s == 4572.3 and tuned.goodput_tok_s == 5056.9
    assert base.node_power_kw == 0.637 and tuned.node_power_kw == 0.616
    assert tuned.accuracy is not None and tuned.accuracy.score == 88.0
    assert seed_v1.fleet.cards == 64
    assert seed_v1.spec is not None and seed_v1.spec.model.vocab_size == 151936


def test_v1_to_v2_keeps_every_value_and_makes_roles_explicit(seed_v1: ReportV1) -> None:
    v2 = v1_to_v2(seed_v1)
    assert isinstance(v2, ReportV2) and v2.schema_version == 2
    assert [c.role for c in v2.configs] == ["baseline", "tuned"]
    assert v2.baseline().label == "vllm-default"
    old = seed_v1.model_dump(mode="json", exclude={"schema_version"})
    new = v2.model_dump(mode="json", exclude={"schema_version"})
    for key, value in old.items():
        if key != "configs":
            assert new[key] == value, key
    for old_cfg, new_cfg in zip(old["configs"], new["configs"], strict=True):
        for key, value in old_cfg.items():
            if key == "accuracy":
                for k, v in value.items():
                    assert new_cfg["accuracy"][k] == v
            else:
                assert new_cfg[key] == value, key
    assert new["updates"] == [] and new["run_files"] == []


def test_v2_dump_reloads_as_the_same_record(seed_v1: ReportV1, tmp_path: Path) -> None:
    v2 = v1_to_v2(seed_v1)
    path = tmp_path / "r.json"
    path.write_text(v2.model_dump_json(indent=2), encoding="utf-8")
    assert parse_report(read_json(path), str(path)) == v2
    assert load_report(path) == v2_to_v3(v2)


def test_v3_dump_reloads_as_the_same_record(seed_v1: ReportV1, tmp_path: Path) -> None:
    v3 = v2_to_v3(v1_to_v2(seed_v1))
    path = tmp_path / "r.json"
    path.write_text(v3.model_dump_json(indent=2), encoding="utf-8")
    assert json.loads(path.read_text(encoding="utf-8"))["schema_version"] == 3
    assert load_report(path) == v3


def test_v2_to_v3_keeps_every_value_and_drops_only_sweep(seed_v1: ReportV1) -> None:
    v2 = v1_to_v2(seed_v1)
    v3 = v2_to_v3(v2)
    assert isinstance(v3, ReportV3) and v3.schema_version == 3
    old = v2.model_dump(mode="json", exclude={"schema_version"})
    new = v3.model_dump(mode="json", exclude={"schema_version"})
    for key, value in old.items():
        if key != "configs":
            assert new[key] == value, key
    for old_cfg, new_cfg in zip(old["configs"], new["configs"], strict=True):
        assert old_cfg.pop("sweep") == []
        for key, value in old_cfg.items():
            assert new_cfg[key] == value, key
        assert new_cfg["search"] == [] and new_cfg["whole_search"] is False


def test_v2_to_v3_turns_probes_and_final_repeats_into_search_windows(seed_v1: ReportV1) -> None:
    data = v1_to_v2(seed_v1).model_dump(mode="json")
    data["configs"][0]["sweep"] = [
        {"rate_rps": 8.0, "slo_pass": True, "ttft_p99_ms": 300.0, "tpot_p99_ms": 40.0},
        {"rate_rps": 16.0, "slo_pass": False, "failure_reason": "ttft", "stopped_early": True},
    ]
    data["configs"][0]["repeats_detail"] = [
        {"rate_rps": 6.8, "goodput_tok_s": 3400.0, "slo_pass": True, "ttft_p99_ms": 410.0}
    ]
    data["configs"][0]["goodput_tok_s"] = 3400.0  # what its one repeat gives
    v3 = v2_to_v3(ReportV2.model_validate(data))
    search = v3.configs[0].search
    assert [(w.step, w.rate_rps, w.slo_pass, w.backoff, w.phase) for w in search] == [
        ("probe", 8.0, True, None, None),
        ("probe", 16.0, False, None, None),
        ("repeat", 6.8, True, None, None),
    ]
    assert search[1].failure_reason == "ttft" and search[1].stopped_early
    assert search[1].ttft_p99_ms is None and search[2].goodput_tok_s == 3400.0
    assert search[2].ttft_p99_ms == 410.0 and not v3.configs[0].whole_search
    # the power detail of the final repeats is kept as it was
    assert v3.configs[0].repeats_detail[0].goodput_tok_s == 3400.0


def test_load_report_migrates_the_seed(seed_file: Path, seed_v1: ReportV1) -> None:
    assert load_report(seed_file) == v2_to_v3(v1_to_v2(seed_v1))


def test_archive_report_is_the_migrated_seed_plus_the_dated_correction(
    repo_root: Path, seed_v1: ReportV1
) -> None:
    path = repo_root / "reports" / f"{SEED_NAME}.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["schema_version"] == 2  # stored as v2, migrated to v3 on load
    archive = load_report(path)
    migrated = v2_to_v3(v1_to_v2(seed_v1))
    assert archive.model_dump(exclude={"updates"}) == migrated.model_dump(exclude={"updates"})
    assert len(archive.updates) == 1
    update = archive.updates[0]
    assert update.date.isoformat() == "2026-10-07"
    assert "3,996 tok/s" in update.text
    assert "4.0 points on 600" in update.text


def test_spec_file_equals_the_seed_spec_object(repo_root: Path, seed_v1: ReportV1) -> None:
    spec = load_spec(repo_root / "specs" / "lambda-qwen3-30b-a3b-fp8-tp1-dp1.spec.yaml")
    assert seed_v1.spec is not None
    # The record keeps the paths of the machine it ran on; the spec file in the repository
    # names none a fresh clone lacks: the model's geometry is written out, and the suite is
    # where `tokenwatt suites build` puts it. Both are outside the fingerprint.
    assert seed_v1.spec.model.config is not None and seed_v1.spec.model.config.startswith("/home/")
    assert spec.model.config is None
    assert spec.model.geometry["num_key_value_heads"] == 4
    assert spec.accuracy.suite == "suites/gsm8k-200.jsonl"
    assert fingerprint(spec) == fingerprint(seed_v1.spec)
    same = {
        "model": spec.model.model_copy(
            update={"config": seed_v1.spec.model.config, "geometry": seed_v1.spec.model.geometry}
        ),
        "accuracy": spec.accuracy.model_copy(update={"suite": seed_v1.spec.accuracy.suite}),
    }
    assert spec.model_copy(update=same) == seed_v1.spec
    assert spec.name == "lambda-qwen3-30b-a3b-fp8-tp1-dp1"
    assert spec.accuracy.stop == ["\n\nQuestion:"]
