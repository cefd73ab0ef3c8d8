"""Bad report records: one clear problem each, naming the file and the field path."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tokenwatt.errors import RecordError
from tokenwatt.records import load_report

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "seed.report.json"
SEED_TEXT = SEED.read_text(encoding="utf-8")
SEED_DATA: dict[str, Any] = json.loads(SEED_TEXT)


@dataclass(frozen=True)
class Case:
    """A bad record: how to make it from the seed, and the one problem it must give."""

    name: str
    make: Callable[[], str]
    field: str
    message: str


def edited(change: Callable[[dict[str, Any]], object]) -> Callable[[], str]:
    def make() -> str:
        data = copy.deepcopy(SEED_DATA)
        change(data)
        return json.dumps(data, ensure_ascii=False, indent=1)

    return make


def text(value: str) -> Callable[[], str]:
    return lambda: value


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set a dotted path (``configs.1.accuracy.score``) in a record."""

    def change(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


def _two_v2_baselines(data: dict[str, Any]) -> None:
    data["schema_version"] = 2
    data["configs"][0]["role"] = "baseline"
    data["configs"][1]["role"] = "baseline"


def _swap_goodput_for(literal: str) -> Callable[[], str]:
    return lambda: SEED_TEXT.replace('"goodput_tok_s": 5056.9', f'"goodput_tok_s": {literal}')


CASES = [
    Case("not-json", text("configs: [baseline, tuned]\n"), "", "not valid JSON: Expecting value"),
    Case("truncated", text(SEED_TEXT[: len(SEED_TEXT) // 2]), "", "ends early (truncated?)"),
    Case("empty-file", text("\n"), "", "the file is empty"),
    Case("not-an-object", text("[1, 2, 3]"), "", "must be a JSON object, got an array"),
    Case("missing-title", edited(lambda d: d.pop("title")), "title", "required field is missing"),
    Case(
        "missing-nested",
        edited(lambda d: d["configs"][1].pop("goodput_tok_s")),
        "configs[1].goodput_tok_s",
        "required field is missing",
    ),
    Case(
        "wrong-type",
        edited(_set("configs.0.ttft_p99_ms", "fast")),
        "configs[0].ttft_p99_ms",
        'must be a number, got "fast"',
    ),
    Case(
        "null-section",
        edited(_set("hardware", None)),
        "hardware",
        "must be a JSON object, got null",
    ),
    Case("nan-literal", _swap_goodput_for("NaN"), "", "NaN is not a number JSON allows"),
    Case("infinity-literal", _swap_goodput_for("-Infinity"), "", "-Infinity is not a number"),
    Case(
        "overflow-to-infinity",
        _swap_goodput_for("1e999"),
        "configs[1].goodput_tok_s",
        "must be a finite number",
    ),
    Case(
        "goodput-beyond-physics",
        _swap_goodput_for("1e308"),
        "configs[1].goodput_tok_s",
        "must be less than or equal to 1000000000000, got 1e+308",
    ),
    Case(
        "power-vanishingly-small",
        edited(_set("configs.1.node_power_kw", 5e-324)),
        "configs[1].node_power_kw",
        "must be at least 1e-09, got 5e-324",
    ),
    Case(
        "negative-power",
        edited(_set("configs.1.node_power_kw", -0.616)),
        "configs[1].node_power_kw",
        "must be greater than 0, got -0.616",
    ),
    Case(
        "negative-goodput",
        edited(_set("configs.0.goodput_tok_s", -4572.3)),
        "configs[0].goodput_tok_s",
        "must be greater than or equal to 0, got -4572.3",
    ),
    Case(
        "score-above-100",
        edited(_set("configs.1.accuracy.score", 188.0)),
        "configs[1].accuracy.score",
        "must be less than or equal to 100, got 188.0",
    ),
    Case(
        "score-below-0",
        edited(_set("configs.0.accuracy.score", -1)),
        "configs[0].accuracy.score",
        "must be greater than or equal to 0, got -1",
    ),
    Case(
        "duplicate-config-key",
        edited(_set("configs.1.key", "baseline")),
        "configs[1].key",
        "configs[0] already has the key 'baseline'; keys must be unique",
    ),
    Case(
        "no-baseline",
        edited(_set("configs.0.key", "default")),
        "configs",
        "no baseline configuration",
    ),
    Case(
        "two-baselines-v2",
        edited(_two_v2_baselines),
        "configs[1].role",
        "a second baseline (configs[0] is already the baseline)",
    ),
    Case(
        "unknown-top-level-field",
        edited(_set("colour", "green")),
        "colour",
        "unknown field",
    ),
    Case(
        "unknown-nested-field",
        edited(_set("configs.1.accuracy.delta_pct", -8.0)),
        "configs[1].accuracy.delta_pct",
        "unknown field",
    ),
    Case(
        "v2-field-in-v1-record",
        edited(_set("updates", [])),
        "updates",
        "unknown field",
    ),
    Case(
        "unknown-schema-version",
        edited(_set("schema_version", 9)),
        "schema_version",
        "unknown schema_version 9; known versions are 1, 2, 3 (a JSON number",
    ),
    Case(
        "schema-version-as-string",
        edited(_set("schema_version", "2")),
        "schema_version",
        'unknown schema_version "2"',
    ),
    Case(
        "bad-date",
        edited(_set("published", "2026-13-06")),
        "published",
        'must be a date as YYYY-MM-DD, got "2026-13-06"',
    ),
    Case(
        "passes-exceed-repeats",
        edited(_set("configs.1.slo_pass_count", 3)),
        "configs[1].slo_pass_count",
        "3 passes cannot exceed repeats (2)",
    ),
    Case(
        "empty-configs",
        edited(_set("configs", [])),
        "configs",
        "must not be empty",
    ),
    Case(
        "bad-id",
        edited(_set("id", "Lab Note #1")),
        "id",
        '"Lab Note #1" is not a valid id',
    ),
    Case(
        "bad-status",
        edited(_set("status", "final")),
        "status",
        "must be 'draft', 'published' or 'retracted', got \"final\"",
    ),
    Case(
        "negative-throttle-count",
        edited(_set("configs.0.throttle_counts.sw_power_cap", -199)),
        "configs[0].throttle_counts.sw_power_cap",
        "must be greater than or equal to 0",
    ),
    Case(
        "zero-fleet",
        edited(_set("fleet.cards", 0)),
        "fleet.cards",
        "must be greater than or equal to 1, got 0",
    ),
    Case(
        "bad-power-kind",
        edited(_set("power.kind", "wall")),
        "power.kind",
        "must be 'board', 'node', 'module' or 'sim', got \"wall\"",
    ),
    Case(
        "bad-embedded-spec",
        edited(_set("spec.sweep.growth", 1)),
        "spec.sweep.growth",
        "must be greater than 1, got 1",
    ),
    Case(
        "vanishing-goodput",
        edited(_set("configs.0.goodput_tok_s", 5e-324)),
        "configs[0].goodput_tok_s",
        "must be at least 1e-09, got 5e-324",
    ),
    Case(
        "duplicate-json-key",
        text('{"id": "a", "id": "b"}'),
        "",
        "the key 'id' appears twice in one object",
    ),
    Case(
        "secret-in-embedded-spec",
        edited(_set("spec.engine.api_key", "sk-live-123")),
        "spec.engine.api_key",
        "secrets never go in a file",
    ),
]


def test_there_are_at_least_twenty_distinct_cases() -> None:
    assert len({c.name for c in CASES}) == len(CASES) >= 20
    assert len({c.make() for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_record_gives_one_clear_problem(case: Case, tmp_path: Path) -> None:
    path = tmp_path / f"{case.name}.json"
    path.write_text(case.make(), encoding="utf-8")
    with pytest.raises(RecordError) as info:
        load_report(path)
    problems = info.value.problems
    assert len(problems) == 1, [str(p) for p in problems]
    problem = problems[0]
    assert problem.file == str(path)
    assert problem.field == case.field
    assert case.message in problem.message
    expected_prefix = f"{path}: {case.field}: " if case.field else f"{path}: "
    assert str(problem).startswith(expected_prefix)
    assert info.value.exit_code == 2


def test_several_problems_are_all_reported(tmp_path: Path) -> None:
    data = copy.deepcopy(SEED_DATA)
    data["configs"][0]["node_power_kw"] = -1
    data["configs"][1]["accuracy"]["score"] = 101
    data.pop("summary")
    path = tmp_path / "many.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(RecordError) as info:
        load_report(path)
    fields = sorted(p.field for p in info.value.problems)
    assert fields == ["configs[0].node_power_kw", "configs[1].accuracy.score", "summary"]


def test_unreadable_and_non_utf8_files(tmp_path: Path) -> None:
    missing = tmp_path / "absent.json"
    with pytest.raises(RecordError, match="cannot read the file"):
        load_report(missing)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{\x00")
    with pytest.raises(RecordError, match="not UTF-8 text"):
        load_report(binary)


def test_a_megabyte_summary_is_refused_before_any_page_is_built(tmp_path: Path) -> None:
    """Text limits keep page builds linear: 1 MB of '&' would make Markdown run for minutes."""
    data = copy.deepcopy(SEED_DATA)
    data["summary"] = "&" * 1_000_000
    path = tmp_path / "big.report.json"
    path.write_text(json.dumps(data))
    with pytest.raises(RecordError) as info:
        load_report(path)
    problem = info.value.problems[0]
    assert problem.field == "summary"
    assert problem.message.startswith("must have at most 4000 characters")
    assert len(str(info.value)) < 400  # the value is not echoed whole


def test_a_lone_surrogate_names_the_field_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "surrogate.report.json"
    path.write_text(SEED_TEXT.replace('"summary": "', '"summary": "\\ud800 ', 1))
    with pytest.raises(RecordError) as info:
        load_report(path)
    (problem,) = info.value.problems
    line = SEED_TEXT[: SEED_TEXT.index('"summary": "')].count("\n") + 1
    assert (problem.field, problem.message) == (
        "summary",
        f"line {line}: \\ud800 is half of a character (a lone surrogate), not text; write the "
        "text as UTF-8",
    )


def test_a_surrogate_pair_written_as_escapes_is_one_character(tmp_path: Path) -> None:
    path = tmp_path / "emoji.report.json"
    path.write_text(SEED_TEXT.replace('"summary": "', '"summary": "\\ud83d\\ude00 ', 1))
    assert load_report(path).summary.startswith("\U0001f600 ")


def test_an_edited_goodput_its_repeats_do_not_give_is_refused(tmp_path: Path) -> None:
    """A report's measured goodput is what its repeats give: edited after `report`, the
    build would publish a figure nothing measured (and claim cards from it)."""
    from tests.runs_factory import make_run, tuned_run
    from tokenwatt.analysis import summarise
    from tokenwatt.records.run.run_input import RunInput

    runs = [make_run(), tuned_run()]
    report = summarise([RunInput(f"runs/{r.label}.json", "0" * 64, r) for r in runs], title="x")
    data = json.loads(report.model_dump_json())
    data["configs"][1]["goodput_tok_s"] = 6000.0
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(RecordError) as info:
        load_report(path)
    (problem,) = info.value.problems
    assert problem.field == "configs[1].goodput_tok_s"
    assert "the mean goodput of the 2 passing repeat(s) at the found load is 5050" in str(problem)
    data["configs"][1]["goodput_tok_s"] = 5060.0  # within 1%: a rebuilt seed's rounding
    path.write_text(json.dumps(data), encoding="utf-8")
    assert load_report(path).configs[1].goodput_tok_s == 5060.0


@pytest.mark.parametrize(("field", "value"), [("energy_j", 1.0), ("window_s", 240.0)])
def test_an_edited_repeat_energy_or_length_is_refused(
    tmp_path: Path, field: str, value: float
) -> None:
    """A report repeat's tokens per joule is goodput × window_s / energy_j: either edited
    after `report` doubles it or makes it absurd, and the build refuses the record."""
    from tests.runs_factory import make_run, tuned_run
    from tokenwatt.analysis import summarise
    from tokenwatt.records.run.run_input import RunInput

    runs = [make_run(), tuned_run()]
    report = summarise([RunInput(f"runs/{r.label}.json", "0" * 64, r) for r in runs], title="x")
    data = json.loads(report.model_dump_json())
    data["configs"][0]["repeats_detail"][1][field] = value
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(RecordError) as info:
        load_report(path)
    (problem,) = info.value.problems
    assert problem.field == "configs[0].repeats_detail[1].energy_j"
    assert "is not the window's mean power × its length" in str(problem)


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (
            lambda d: d["configs"][0]["search"][0].__setitem__("ttft_p99_ms", "abc"),
            "configs[0].search[0].ttft_p99_ms",
            "must be a number or 'inf', got \"abc\"",
        ),
        (
            lambda d: d["spec"]["measurement"].__setitem__("workers", "many"),
            "spec.measurement.workers",
            "must be a whole number or 'auto', got \"many\"",
        ),
        (  # a field named like a pydantic type, kept
            lambda d: d.__setitem__("updates", [{"date": "2026-13-01", "text": "x"}]),
            "updates[0].date",
            None,
        ),
        (  # dictionary keys, capitalised or hyphenated, kept
            lambda d: d["configs"][0].__setitem__("throttle_counts", {"Sw-Power": "x"}),
            "configs[0].throttle_counts.Sw-Power",
            'must be a whole number, got "x"',
        ),
    ],
)
def test_a_union_field_is_named_as_the_reader_sees_it_in_one_problem(
    tmp_path: Path, edit: Any, field: str, message: str | None
) -> None:
    """pydantic reports each member of a union (``constrained-float``, ``literal['inf']``)
    as a place of its own: the reader gets one problem at the field they can find."""
    from tests.runs_factory import make_run, tuned_run
    from tokenwatt.analysis import summarise
    from tokenwatt.records.run.run_input import RunInput

    runs = [make_run(), tuned_run()]
    report = summarise([RunInput(f"runs/{r.label}.json", "0" * 64, r) for r in runs], title="x")
    data = json.loads(report.model_dump_json())
    edit(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(RecordError) as info:
        load_report(path)
    (problem,) = info.value.problems
    assert problem.field == field
    assert message is None or problem.message == message
    assert "constrained" not in str(info.value) and "literal[" not in str(info.value)
