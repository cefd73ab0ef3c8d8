"""The record and spec loaders (``tokenwatt/records/reading/load.py``) with hostile and careless
input (found by trying to break them), and the wording of their messages.

Each case is bad input that used to crash (a traceback, not exit 2), hang, pass silently, or
let a secret through into records; each must now be one clear problem naming file and field.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import time
from pathlib import Path
from typing import Annotated, Any

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field

from tokenwatt.errors import RecordError, SpecError
from tokenwatt.records import load_report, load_spec
from tokenwatt.records.reading.load import read_json, validate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SEED: dict[str, Any] = json.loads((FIXTURES / "seed.report.json").read_text(encoding="utf-8"))
SPEC_FILE = (
    Path(__file__).resolve().parents[2] / "specs" / "lambda-qwen3-30b-a3b-fp8-tp1-dp1.spec.yaml"
)
SPEC_TEXT = SPEC_FILE.read_text(encoding="utf-8")
SECRET = "sk-proj-DoNotEchoMe0123456789"


def _one_problem(exc: pytest.ExceptionInfo[RecordError] | pytest.ExceptionInfo[SpecError]) -> str:
    assert len(exc.value.problems) == 1, exc.value.problems
    return str(exc.value.problems[0])


@pytest.mark.parametrize(
    "text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000]
)
def test_deeply_nested_json_is_an_input_error_not_a_recursion_crash(
    text: str, tmp_path: Path
) -> None:
    path = tmp_path / "deep.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RecordError) as exc:
        read_json(path)
    assert f"{path}: not valid JSON: arrays or objects are nested too deeply" in _one_problem(exc)


def test_integer_of_thousands_of_digits_names_no_python_internals(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps(SEED).replace("4572.3", "1" + "0" * 5000), encoding="utf-8")
    with pytest.raises(RecordError) as exc:
        load_report(path)
    message = _one_problem(exc)
    assert "thousands of digits" in message
    assert "sys." not in message


def _record(tmp_path: Path, dotted: str, value: Any) -> Path:
    data = copy.deepcopy(SEED)
    *parents, last = dotted.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[int(last) if isinstance(node, list) else last] = value
    path = tmp_path / "x.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("dotted", "value", "message"),
    [
        ("configs.0.goodput_tok_s", "4572.3", 'must be a number, got "4572.3"'),
        ("runs", True, "must be a whole number, got True"),
        ("runs", 2.0, "must be a whole number, got 2.0"),
        ("fleet.cards", "64", 'must be a whole number, got "64"'),
        ("configs.0.throttle_counts.sw_power_cap", "199", 'must be a whole number, got "199"'),
        ("hardware.count", False, "must be a whole number, got False"),
    ],
)
def test_record_types_are_strict_as_the_published_schema(
    dotted: str, value: Any, message: str, tmp_path: Path
) -> None:
    """A record is published as written, beside its JSON Schema: "4572.3" is not a number."""
    path = _record(tmp_path, dotted, value)
    with pytest.raises(RecordError) as exc:
        load_report(path)
    field = dotted.replace(".0.", "[0].")
    assert _one_problem(exc) == f"{path}: {field}: {message}"


def test_schema_version_one_point_zero_is_named_clearly(tmp_path: Path) -> None:
    path = _record(tmp_path, "schema_version", 1.0)
    with pytest.raises(RecordError) as exc:
        load_report(path)
    assert _one_problem(exc).startswith(f"{path}: schema_version: unknown schema_version 1.0")


def test_dates_still_load_from_strings(tmp_path: Path) -> None:
    path = _record(tmp_path, "published", "2026-10-06")
    assert str(load_report(path).published) == "2026-10-06"


# -- specs ---------------------------------------------------------------------------------


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "x.spec.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _replace(old: str, new: str) -> str:
    assert old in SPEC_TEXT, old
    return SPEC_TEXT.replace(old, new, 1)


def test_yaml_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    """Nine levels of nine aliases: 387 million strings once expanded (minutes, gigabytes)."""
    lines = ['l0: &l0 ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    path = _spec(tmp_path, "\n".join(lines) + "\n" + SPEC_TEXT)
    started = time.monotonic()
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    assert time.monotonic() - started < 5  # bound, not a timing target: it used to hang
    assert "anchors and aliases (&name, *name) are not allowed" in _one_problem(exc)
    assert "(line 2, column" in _one_problem(exc)


def test_deeply_nested_yaml_is_a_spec_error(tmp_path: Path) -> None:
    path = _spec(tmp_path, "a: " + "[" * 5000 + "]" * 5000 + "\n" + SPEC_TEXT)
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    assert "nested too deeply" in _one_problem(exc)


def test_yaml_integer_of_thousands_of_digits_is_a_spec_error(tmp_path: Path) -> None:
    path = _spec(tmp_path, _replace("  seed: 0", "  seed: 1" + "0" * 5000))
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    assert "thousands of digits" in _one_problem(exc)


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        (
            "  window_s: 120",
            '  window_s: "120"',
            "measurement.window_s",
            'must be a number, got "120"',
        ),
        (
            "  window_s: 120",
            "  window_s: 1.2e2",
            "measurement.window_s",
            'must be a number, got "1.2e2" (YAML reads a number with an exponent as text'
            " unless the exponent has a sign: write 1.2e+2)",
        ),
        (
            "  repeats: 2",
            "  repeats: true",
            "measurement.repeats",
            "must be a whole number, got True",
        ),
        (
            "  ignore_eos: true",
            "  ignore_eos: 1",
            "engine.ignore_eos",
            "must be true or false, got 1",
        ),
        (
            "  ignore_eos: true",
            '  ignore_eos: "false"',
            "engine.ignore_eos",
            'must be true or false, got "false"',
        ),
    ],
)
def test_spec_types_are_strict(
    old: str, new: str, field: str, message: str, tmp_path: Path
) -> None:
    path = _spec(tmp_path, _replace(old, new))
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    assert _one_problem(exc) == f"{path}: {field}: {message}"


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        (
            "  api_key_env: null",
            f"  api_key_env: {SECRET}",
            "engine.api_key_env",
            "must be the name of an environment variable",
        ),
        (
            "  api_key_env: null",
            '  api_key_env: ""',
            "engine.api_key_env",
            "must be the name of an environment variable",
        ),
        (
            "  password_env: null",
            f"  password_env: '{SECRET}!'",
            "power.password_env",
            "must be the name of an environment variable",
        ),
        (
            "http://127.0.0.1:8000/v1",
            f"http://user:{SECRET}@127.0.0.1:8000/v1",
            "engine.endpoint",
            "must not carry a user name or password",
        ),
        (
            "http://127.0.0.1:8000/v1",
            f"http://127.0.0.1:8000/v1?api_key={SECRET}",
            "engine.endpoint",
            "must not carry a key or token",
        ),
        ("http://127.0.0.1:8000/v1", "http://", "engine.endpoint", "must name a host"),
        (
            "http://127.0.0.1:8000/v1",
            f"ftp://user:{SECRET}@127.0.0.1:8000/v1",
            "engine.endpoint",
            "must start with http:// or https://, got 'ftp://user:[redacted]@",
        ),
        (
            "http://127.0.0.1:8000/v1",
            f"grpc://127.0.0.1:8000/v1?token={SECRET}",
            "engine.endpoint",
            "must start with http:// or https://",
        ),
        (
            "  api_key_env: null",
            f"  api_key_env: null\n  flags: [--api-key, {SECRET}]",
            "engine.flags[0]",
            "--api-key would put the engine's key",
        ),
        (
            "  api_key_env: null",
            f"  api_key_env: null\n  flags: [--api-key={SECRET}]",
            "engine.flags[0]",
            "--api-key would put the engine's key",
        ),
    ],
)
def test_secrets_in_a_spec_are_refused_and_never_echoed(
    old: str, new: str, field: str, message: str, tmp_path: Path
) -> None:
    path = _spec(tmp_path, _replace(old, new))
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    problem = _one_problem(exc)
    assert problem.startswith(f"{path}: {field}: {message}"), problem
    assert "DoNotEchoMe" not in str(exc.value)


def test_power_url_with_password_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(SPEC_TEXT)
    data["power"].update(source="redfish", url=f"https://admin:{SECRET}@bmc.local/redfish/v1")
    path = _spec(tmp_path, yaml.safe_dump(data))
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    assert _one_problem(exc).startswith(f"{path}: power.url: must not carry a user name")
    assert "DoNotEchoMe" not in str(exc.value)


def test_ordinary_env_names_and_urls_still_load(tmp_path: Path) -> None:
    text = _replace("  api_key_env: null", "  api_key_env: VLLM_API_KEY").replace(
        "http://127.0.0.1:8000/v1", "https://engine.example:8443/v1?route=a"
    )
    spec = load_spec(_spec(tmp_path, text))
    assert spec.engine.api_key_env == "VLLM_API_KEY"


# Bad-input messages are chosen by pydantic's error type code and filled from its context.


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")

    started: dt.datetime | None = None
    day: dt.date | None = None
    gpus: Annotated[list[int], Field(max_length=2)] = []
    name: Annotated[str, Field(min_length=1, max_length=3)] = "a"
    share: Annotated[float, Field(multiple_of=0.5)] = 1.0
    step: Annotated[float, Field(gt=0.0, le=1e12)] = 1.0


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"gpus": [1, 2, 3]}, "gpus", "must have at most 2 items, not 3"),
        ({"name": ""}, "name", 'must have at least 1 character, got ""'),
        ({"name": "abcd"}, "name", 'must have at most 3 characters, got "abcd"'),
        ({"share": 0.7}, "share", "must be a multiple of 0.5, got 0.7"),
        ({"step": 0}, "step", "must be greater than 0, got 0"),
        (
            {"step": 2e12},
            "step",
            "must be less than or equal to 1000000000000, got 2000000000000.0",
        ),
        (
            {"day": "2026-02-30"},
            "day",
            'must be a date as YYYY-MM-DD, got "2026-02-30" (day value is outside expected range)',
        ),
        (
            {"started": 5},
            "started",
            "must be a date and time as YYYY-MM-DDTHH:MM:SSZ, got 5",
        ),
    ],
)
def test_message_by_error_type(data: dict[str, object], field: str, message: str) -> None:
    with pytest.raises(RecordError) as info:
        validate(_Model, data, "x.json")
    assert [(p.field, p.message) for p in info.value.problems] == [(field, message)]


def test_a_bad_date_names_the_value_and_the_parser_reason() -> None:
    """The reason in brackets is the date parser's (pydantic's ``ctx``), so only its
    presence is asserted: its words may change with pydantic."""
    with pytest.raises(RecordError) as info:
        validate(_Model, {"day": "2026-02-30"}, "x.json")
    (problem,) = info.value.problems
    assert problem.field == "day"
    assert problem.message.startswith('must be a date as YYYY-MM-DD, got "2026-02-30" (')
    assert problem.message.endswith(")")


def test_a_session_file_with_an_alias_or_nan_names_the_session_file(tmp_path: Path) -> None:
    """The YAML reader is shared with specs; its messages name the kind of file read."""
    from tokenwatt.errors import InputError
    from tokenwatt.records import load_session

    path = tmp_path / "s.yaml"
    path.write_text("title: &t x\nspec: *t\n", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_session(path)
    assert not isinstance(exc.value, SpecError)
    assert [str(p) for p in exc.value.problems] == [
        f"{path}: not valid YAML: anchors and aliases (&name, *name) are not allowed in a "
        "session file; write the values out (line 2, column 7)"
    ]
    path.write_text("title: x\nspec: s.yaml\nrepeat: .nan\n", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_session(path)
    assert not isinstance(exc.value, SpecError)
    assert [str(p) for p in exc.value.problems] == [f"{path}: repeat: nan is not a finite number"]
