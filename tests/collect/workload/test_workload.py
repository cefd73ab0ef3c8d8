"""chat-mix-v1 lengths and ids, trace replay and its errors, workload_for."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from tokenwatt.collect.workload.workload import (
    RequestSpec,
    chat_mix_v1,
    load_trace,
    lognormal_params,
    workload_for,
)
from tokenwatt.errors import InputError
from tokenwatt.records.spec.spec import Spec
from tokenwatt.records.spec.spec_load import LengthDist

SEED_SPEC = Path(__file__).resolve().parents[2] / "fixtures" / "seed.report.json"


def test_chat_mix_v1_matches_the_design_medians_and_p90s() -> None:
    # 4,000 draws: the sample median and p90 are within about 2-3% (one s.d.) of the truth.
    specs = list(itertools.islice(chat_mix_v1(seed=1, vocab_size=151_936), 4_000))
    inputs = np.array([len(s.prompt) for s in specs])
    outputs = np.array([s.max_tokens for s in specs])
    assert np.median(inputs) == pytest.approx(1024, rel=0.08)
    assert np.percentile(inputs, 90) == pytest.approx(4096, rel=0.08)
    assert np.median(outputs) == pytest.approx(256, rel=0.08)
    assert np.percentile(outputs, 90) == pytest.approx(1024, rel=0.08)


def test_lognormal_parameters_reproduce_median_and_p90_exactly() -> None:
    mu, sigma = lognormal_params(LengthDist(median=1024, p90=4096))
    assert math.exp(mu) == pytest.approx(1024)
    assert math.exp(mu + stats.norm.ppf(0.9) * sigma) == pytest.approx(4096)


def test_chat_mix_v1_ids_stay_inside_the_vocabulary_and_off_control_tokens() -> None:
    ids = np.concatenate([s.prompt for s in itertools.islice(chat_mix_v1(2, 1000), 200)])
    assert ids.min() >= 10 and ids.max() < 1000
    assert len(np.unique(ids)) > 900  # spread over the whole range


def test_chat_mix_v1_is_seeded() -> None:
    a = list(itertools.islice(chat_mix_v1(3, 5000, LengthDist(median=8, p90=16)), 50))
    b = list(itertools.islice(chat_mix_v1(3, 5000, LengthDist(median=8, p90=16)), 50))
    c = list(itertools.islice(chat_mix_v1(4, 5000, LengthDist(median=8, p90=16)), 50))
    assert a == b and a != c


def test_chat_mix_v1_custom_lengths_context_cap_and_text() -> None:
    dist = LengthDist(median=100, p90=100)
    specs = list(itertools.islice(chat_mix_v1(0, 500, dist, LengthDist(median=20, p90=20)), 10))
    assert {len(s.prompt) for s in specs} == {100} and {s.max_tokens for s in specs} == {20}
    capped = itertools.islice(chat_mix_v1(0, 500, max_total_tokens=512), 500)
    assert all(
        s.prompt_tokens is not None and s.prompt_tokens + s.max_tokens <= 512 for s in capped
    )
    text = next(chat_mix_v1(0, 500, dist, text=True))
    assert isinstance(text.prompt, str) and len(text.prompt.split()) == 100
    assert text.prompt_tokens is None


def test_chat_mix_v1_refuses_a_tiny_vocabulary() -> None:
    with pytest.raises(ValueError, match="vocab_size"):
        next(chat_mix_v1(0, 5))


def write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_load_trace_reads_both_forms(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            json.dumps({"prompt": "hello", "max_tokens": 5, "id": "a"}),
            "",
            json.dumps({"prompt": [1, 2, 3], "max_tokens": 2}),
            json.dumps({"input_tokens": 7, "output_tokens": 3}),
        ],
    )
    entries = load_trace(path, vocab_size=100, seed=1)
    assert entries[0] == RequestSpec("hello", 5, "a")
    assert entries[1] == RequestSpec([1, 2, 3], 2)
    assert len(entries[2].prompt) == 7 and entries[2].max_tokens == 3
    assert all(10 <= t < 100 for t in entries[2].prompt)  # type: ignore[union-attr]
    assert load_trace(path, vocab_size=100, seed=1) == entries


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"prompt": "x"}', "expected"),
        ('{"prompt": "x", "max_tokens": 0}', "max_tokens must be a positive integer"),
        ('{"prompt": "x", "max_tokens": true}', "max_tokens must be a positive integer"),
        ('{"prompt": "", "max_tokens": 3}', "prompt must be"),
        ('{"prompt": [1, "a"], "max_tokens": 3}', "prompt must be"),
        ('{"input_tokens": -1, "output_tokens": 3}', "input_tokens must be"),
        ('{"prompt": "x", "max_tokens": 3, "temperature": 0}', "got keys"),
        ('{"prompt": "x", "max_tokens": 3, "id": 5}', "id must be a string"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"input_tokens": 10000000000, "output_tokens": 3}', "input_tokens must be at most"),
        ('{"input_tokens": 3, "output_tokens": 1048577}', "output_tokens must be at most"),
        ('{"prompt": "x", "max_tokens": 10000000000}', "max_tokens must be at most"),
        ('{"prompt": [5], "max_tokens": 1048576}', None),
        (json.dumps({"prompt": [5] * 1_048_577, "max_tokens": 1}), "more than 1,048,576"),
    ],
)
def test_bad_trace_lines_name_file_and_line(tmp_path: Path, line: str, message: str | None) -> None:
    path = write(tmp_path, [json.dumps({"prompt": "ok", "max_tokens": 1}), line])
    if message is None:  # the cap itself is allowed
        assert len(load_trace(path, vocab_size=100)) == 2
        return
    with pytest.raises(InputError, match=message) as info:
        load_trace(path, vocab_size=100)
    problem = info.value.problems[0]
    assert problem.file == str(path) and problem.field == "line 2"


def test_length_only_trace_needs_a_vocabulary(tmp_path: Path) -> None:
    path = write(tmp_path, ['{"input_tokens": 3, "output_tokens": 3}'])
    with pytest.raises(InputError, match="vocab_size"):
        load_trace(path)


def test_missing_and_empty_traces(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_trace(tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match="no requests"):
        load_trace(write(tmp_path, ["", "  "]))


def seed_spec(**workload: object) -> Spec:
    data = json.loads(SEED_SPEC.read_text())["spec"]
    data["workload"].update(workload)
    return Spec.model_validate(data)


def test_workload_for_chat_mix_and_trace(tmp_path: Path) -> None:
    spec = seed_spec(trace="chat-mix-v1", seed=9)
    first = next(workload_for(spec))
    assert first == next(
        chat_mix_v1(
            9, spec.model.vocab_size, spec.workload.input_tokens, spec.workload.output_tokens
        )
    )
    write(
        tmp_path,
        [
            json.dumps({"prompt": "a", "max_tokens": 1}),
            json.dumps({"prompt": "b", "max_tokens": 2}),
        ],
    )
    replay = workload_for(seed_spec(trace="trace.jsonl"), base_dir=tmp_path)
    assert [s.prompt for s in itertools.islice(replay, 5)] == ["a", "b", "a", "b", "a"]
