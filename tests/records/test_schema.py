"""JSON Schema export: the committed copies under schemas/ are current and usable."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from tokenwatt.cli import cli
from tokenwatt.records.reading.schema import json_schemas, schema_files, schema_text
from tokenwatt.records_io import StaleSchemaError, export_schemas


def test_committed_schemas_are_current(repo_root: Path) -> None:
    for path, text in schema_files(repo_root / "schemas").items():
        assert path.is_file(), f"{path} is missing: run `tokenwatt schema` and commit it"
        assert path.read_text(encoding="utf-8") == text, (
            f"{path} is stale: run `tokenwatt schema` and commit it"
        )


def test_schema_check_command_passes_on_the_repository(repo_root: Path) -> None:
    result = CliRunner().invoke(cli, ["schema", "--check", "--out", str(repo_root / "schemas")])
    assert result.exit_code == 0, result.output
    assert "5 schema files are current" in result.output


def test_export_then_check_and_stale_detection(tmp_path: Path) -> None:
    out = tmp_path / "schemas"
    with pytest.raises(StaleSchemaError, match=r"report\.schema\.json"):
        export_schemas(out, check=True)
    assert not out.exists()  # --check writes nothing
    first = export_schemas(out)
    assert sorted(p.name for p in first.written) == [
        "replication.schema.json",
        "report.schema.json",
        "run.schema.json",
        "session.schema.json",
        "spec.schema.json",
    ]
    assert export_schemas(out).written == []  # nothing changed, nothing rewritten
    (out / "spec.schema.json").write_text("{}\n", encoding="utf-8")
    with pytest.raises(StaleSchemaError, match=r"spec\.schema\.json") as info:
        export_schemas(out, check=True)
    assert "report.schema.json" not in str(info.value)
    result = CliRunner().invoke(cli, ["schema", "--check", "--out", str(out)])
    assert result.exit_code == 1
    assert "spec.schema.json" in result.output
    assert not list(out.glob(".*.tmp"))


def test_schema_text_is_canonical() -> None:
    schemas = json_schemas()
    assert set(schemas) == {"report", "run", "spec", "session", "replication"}
    text = schema_text(schemas["spec"])
    assert text.endswith("}\n") and json.loads(text) == schemas["spec"]
    assert schema_text(json.loads(text)) == text


def test_seed_and_archive_validate_against_the_exported_report_schema(repo_root: Path) -> None:
    schema = json.loads((repo_root / "schemas" / "report.schema.json").read_text("utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    for path in [
        repo_root / "tests" / "fixtures" / "seed.report.json",
        repo_root / "reports" / "lab-h100-qwen3-30b-a3b-kv-cache.json",
    ]:
        errors = list(validator.iter_errors(json.loads(path.read_text("utf-8"))))
        assert errors == [], (path, [e.message for e in errors])
    bad = json.loads((repo_root / "tests" / "fixtures" / "seed.report.json").read_text("utf-8"))
    bad["configs"][0]["node_power_kw"] = -1
    assert list(validator.iter_errors(bad)), "the schema must reject negative power"


def test_spec_file_validates_against_the_exported_spec_schema(repo_root: Path) -> None:
    schema = json.loads((repo_root / "schemas" / "spec.schema.json").read_text("utf-8"))
    spec_path = repo_root / "specs" / "lambda-qwen3-30b-a3b-fp8-tp1-dp1.spec.yaml"
    data = yaml.safe_load(spec_path.read_text("utf-8"))
    jsonschema.Draft202012Validator(schema).validate(data)
    data["slo"]["ttft_p99_ms"] = 0
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(data)


def test_the_example_session_file_points_at_and_validates_against_the_session_schema(
    repo_root: Path,
) -> None:
    path = repo_root / "specs" / "sim-session.yaml"
    text = path.read_text("utf-8")
    assert text.splitlines()[0] == "# yaml-language-server: $schema=../schemas/session.schema.json"
    schema = json.loads((repo_root / "schemas" / "session.schema.json").read_text("utf-8"))
    data = yaml.safe_load(text)
    jsonschema.Draft202012Validator(schema).validate(data)
    data["configurations"][0]["role"] = "winner"
    with pytest.raises(jsonschema.ValidationError, match="'winner' is not one of"):
        jsonschema.Draft202012Validator(schema).validate(data)
