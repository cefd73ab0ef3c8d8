"""Bad benchmark specs: each a clear SpecError naming the file and the field."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tokenwatt.errors import SpecError
from tokenwatt.records import load_spec

SPEC = Path(__file__).resolve().parents[2] / "specs" / "lambda-qwen3-30b-a3b-fp8-tp1-dp1.spec.yaml"
SPEC_TEXT = SPEC.read_text(encoding="utf-8")
SPEC_DATA: dict[str, Any] = yaml.safe_load(SPEC_TEXT)


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], str]
    field: str
    message: str


def edited(section: str, key: str, value: Any = None, *, drop: bool = False) -> Callable[[], str]:
    def make() -> str:
        data = copy.deepcopy(SPEC_DATA)
        target = data if section == "" else data[section]
        if drop:
            del target[key]
        else:
            target[key] = value
        return yaml.safe_dump(data, sort_keys=False)

    return make


def text(value: str) -> Callable[[], str]:
    return lambda: value


CASES = [
    Case("list-as-key", text("name: x\nslo:\n  [a, b]: 3\n"), "", "a list is used as a key"),
    Case("unknown-section", edited("", "warmup", 10), "warmup", "unknown field"),
    Case("unknown-key", edited("slo", "ttft_p95_ms", 900), "slo.ttft_p95_ms", "unknown field"),
    Case(
        "negative-start-rate",
        edited("sweep", "start_rps", -2),
        "sweep.start_rps",
        "must be greater than 0, got -2",
    ),
    Case(
        "negative-rate-in-list",
        edited("sweep", "rates", [-1, 2, 4]),
        "sweep.rates[0]",
        "must be greater than 0, got -1",
    ),
    Case(
        "zero-ttft-slo",
        edited("slo", "ttft_p99_ms", 0),
        "slo.ttft_p99_ms",
        "must be greater than 0, got 0",
    ),
    Case(
        "negative-tpot-slo",
        edited("slo", "tpot_p99_ms", -50),
        "slo.tpot_p99_ms",
        "must be greater than 0, got -50",
    ),
    Case("growth-one", edited("sweep", "growth", 1), "sweep.growth", "must be greater than 1"),
    Case(
        "growth-below-one",
        edited("sweep", "growth", 0.5),
        "sweep.growth",
        "must be greater than 1, got 0.5",
    ),
    Case(
        "missing-endpoint",
        edited("engine", "endpoint", drop=True),
        "engine.endpoint",
        "required field is missing",
    ),
    Case(
        "endpoint-with-a-key-in-its-path",
        edited("engine", "endpoint", "http://127.0.0.1:8000/proxy/sk-live0123456789abcdef/v1"),
        "engine.endpoint",
        "has a path that looks like it holds a key or token",
    ),
    Case(
        "endpoint-with-a-trailing-space",
        edited("engine", "endpoint", "http://127.0.0.1:8000/v1 "),
        "engine.endpoint",
        "must not contain spaces or other whitespace",
    ),
    Case(
        "endpoint-without-scheme",
        edited("engine", "endpoint", "127.0.0.1:8000/v1"),
        "engine.endpoint",
        "must start with http:// or https://",
    ),
    Case(
        "start-above-max",
        edited("sweep", "start_rps", 4000),
        "sweep.start_rps",
        "start_rps (4000) exceeds max_rps (2000)",
    ),
    Case(
        "rates-not-increasing",
        edited("sweep", "rates", [1, 4, 4, 8]),
        "sweep.rates[2]",
        "strictly increasing (4 follows 4)",
    ),
    Case("empty-rates", edited("sweep", "rates", []), "sweep.rates", "at least one rate"),
    Case("backoff-one", edited("sweep", "backoff", 1.0), "sweep.backoff", "must be less than 1"),
    Case(
        "backoff-above-one",
        edited("sweep", "backoff", 1.5),
        "sweep.backoff",
        "must be less than 1, got 1.5",
    ),
    Case(
        "redfish-without-url",
        edited("power", "source", "redfish"),
        "power.url",
        "power.source 'redfish' needs power.url",
    ),
    Case(
        "command-without-command",
        edited("power", "source", "command"),
        "power.command",
        "needs power.command",
    ),
    Case("bad-yaml", text("name: [unclosed\n"), "", "not valid YAML: expected ',' or ']'"),
    Case(
        "yaml-tab-indent",
        text("name: x\n\tengine: {}\n"),
        "",
        "not valid YAML: found character '\\t' that cannot start any token (line 2, column 1)",
    ),
    Case(
        "nan-slo",
        lambda: SPEC_TEXT.replace("tpot_p99_ms: 50.0", "tpot_p99_ms: .nan"),
        "slo.tpot_p99_ms",
        "not a finite number",
    ),
    Case(
        "infinite-max-rate",
        lambda: SPEC_TEXT.replace("max_rps: 2000", "max_rps: .inf"),
        "sweep.max_rps",
        "not a finite number",
    ),
    Case(
        "zero-repeats",
        edited("measurement", "repeats", 0),
        "measurement.repeats",
        "must be greater than or equal to 1, got 0",
    ),
    Case(
        "window-as-words",
        edited("measurement", "window_s", "two minutes"),
        "measurement.window_s",
        'must be a number, got "two minutes"',
    ),
    Case(
        "unknown-kv-dtype",
        edited("model", "kv_dtype", "int3"),
        "model.kv_dtype",
        'got "int3"',
    ),
    Case(
        "missing-vocab-size",
        edited("model", "vocab_size", drop=True),
        "model.vocab_size",
        "required field is missing",
    ),
    Case(  # token ids are drawn from 10 up: a smaller vocabulary would crash the draw
        "tiny-vocab-size",
        edited("model", "vocab_size", 5),
        "model.vocab_size",
        "must be greater than or equal to 11, got 5",
    ),
    Case(
        "p90-below-median",
        edited("workload", "input_tokens", {"median": 1024, "p90": 512}),
        "workload.input_tokens.p90",
        "p90 (512) must not be below the median (1024)",
    ),
    Case(
        "secret-in-spec",
        edited("engine", "api_key", "sk-live-123"),
        "engine.api_key",
        "secrets never go in a file",
    ),
    Case(
        "duplicate-key",
        text("name: a\nname: b\n"),
        "",
        "the key 'name' appears twice in one mapping (line 2, column 1)",
    ),
    Case("a-list", text("- name: a\n"), "", "a spec must be a mapping of sections"),
    Case("empty-file", text(""), "", "got null"),
]


def test_there_are_at_least_fifteen_distinct_cases() -> None:
    assert len({c.name for c in CASES}) == len(CASES) >= 15
    assert len({c.make() for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_spec_is_a_clear_spec_error(case: Case, tmp_path: Path) -> None:
    path = tmp_path / f"{case.name}.spec.yaml"
    path.write_text(case.make(), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    problems = info.value.problems
    assert len(problems) == 1, [str(p) for p in problems]
    (problem,) = problems
    assert (problem.file, problem.field) == (str(path), case.field)
    assert case.message in problem.message
    assert "\n" not in str(problem)
    assert info.value.exit_code == 2


def test_the_seed_spec_loads(tmp_path: Path) -> None:
    path = tmp_path / "ok.spec.yaml"
    path.write_text(SPEC_TEXT, encoding="utf-8")
    spec = load_spec(path)
    assert spec.sweep.max_rps == 2000 and spec.slo.tpot_p99_ms == 50.0


def test_a_spec_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.spec.yaml"
    path.write_bytes(SPEC_TEXT.encode("utf-8") + "# caf\u00e9\n".encode("latin-1"))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    line = SPEC_TEXT.count("\n") + 1
    assert str(info.value) == (f"{path}: line {line}: not UTF-8 text (byte 0xe9); save it as UTF-8")


def test_missing_spec_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read the file"):
        load_spec(tmp_path / "nope.spec.yaml")
