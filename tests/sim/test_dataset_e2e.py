"""Datasets: a ShareGPT-format file replayed as text prompts on the chat API, lengths
measured with the model's tokenizer (a word-level tokenizer the test builds, so every count
is known), end to end against ``tokenwatt sim``; and the loader's own rules."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tokenizers import Tokenizer, models, pre_tokenizers

from tests.sim.sim_process import REPO, start_sim
from tokenwatt.collect.workload.dataset import load_sharegpt
from tokenwatt.collect.workload.tokens import load_tokenizer
from tokenwatt.collect.workload.workload import workload_for
from tokenwatt.errors import InputError
from tokenwatt.records import RunRecord, Spec, fingerprint
from tokenwatt.records.run.run import DatasetStats

SPEC = REPO / "tests" / "fixtures" / "sim.spec.yaml"
WORDS = [
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "g",
    "h",
]
FIRST = "one two three four five"  # 5 tokens; its reply has 8
SECOND = "six seven eight nine ten eleven"  # 6 tokens; its reply has 4
CONVERSATIONS = [
    {
        "id": "c1",
        "conversations": [
            {"from": "human", "value": FIRST},
            {"from": "gpt", "value": "a b c d e f g h"},
        ],
    },
    {"id": "no-turns"},
    {"id": "unanswered", "conversations": [{"from": "human", "value": FIRST}]},
    {
        "id": "c2",
        "conversations": [
            {"from": "gpt", "value": "a b c d e"},  # a greeting before the first human turn
            {"from": "human", "value": SECOND},
            {"from": "gpt", "value": "e f g h"},
        ],
    },
    {
        "id": "short",
        "conversations": [{"from": "human", "value": "one two"}, {"from": "gpt", "value": FIRST}],
    },
    "not an entry",
]
SKIPPED = {
    "no conversations list": 1,
    "no gpt reply": 1,
    "not an object": 1,
    "prompt or reply under 4 tokens": 1,
}


def _tokenizer(path: Path) -> Path:
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path))
    return path


def _spec(folder: Path, conversations: object = CONVERSATIONS) -> Path:
    (folder / "conv.json").write_text(json.dumps(conversations), encoding="utf-8")
    _tokenizer(folder / "tokenizer.json")
    data = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    data["engine"]["api"] = "chat"
    data["model"]["tokenizer"] = "tokenizer.json"
    data["workload"]["dataset"] = {"kind": "sharegpt", "path": "conv.json"}
    data["sweep"].update(start_rps=20, max_rps=40)
    del data["accuracy"]["suite"]
    path = folder / "ds.spec.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_the_stream_sends_the_first_human_turns_with_their_reply_lengths(tmp_path: Path) -> None:
    spec_path = _spec(tmp_path)
    spec = Spec.model_validate(yaml.safe_load(spec_path.read_text(encoding="utf-8")))
    counter = load_tokenizer(tmp_path / "tokenizer.json")
    stream = workload_for(spec, base_dir=tmp_path, count_tokens=counter, spec_file=spec_path)
    sent = [next(stream) for _ in range(4)]
    assert [(r.prompt, r.max_tokens, r.id, r.text_tokens) for r in sent] == [
        (FIRST, 8, "c1", 5),
        (SECOND, 4, "c2", 6),
        (FIRST, 8, "c1", 5),  # a dataset shorter than the run is cycled
        (SECOND, 4, "c2", 6),
    ]
    stats = stream.dataset_stats()
    assert stats is not None
    assert stats.model_dump(exclude={"sha256"}) == {
        "kind": "sharegpt",
        "entries": 6,
        "used": 2,
        "skipped": SKIPPED,
        "prompt_tokens": 11,
        "output_tokens": 12,
    }
    # An entry that does not fit the context is skipped: 5 + 8 = 13 tokens > 12.
    loaded = load_sharegpt(tmp_path / "conv.json", counter, max_total_tokens=12)
    assert [e.id for e in loaded.entries] == ["c2"]
    assert loaded.skipped["longer than the context"] == 1


def test_a_file_without_usable_entries_is_refused_naming_it(tmp_path: Path) -> None:
    counter = load_tokenizer(_tokenizer(tmp_path / "tokenizer.json"))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(CONVERSATIONS[1:3]), encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_sharegpt(bad, counter, file="ds.spec.yaml")
    problem = err.value.problems[0]
    assert (problem.file, problem.field) == ("ds.spec.yaml", "workload.dataset")
    assert problem.message == (
        f"{bad} has no usable ShareGPT entry (2 entries: 1 no conversations list, 1 no gpt reply)"
    )
    bad.write_text("{}", encoding="utf-8")
    with pytest.raises(InputError, match="must hold a JSON list"):
        load_sharegpt(bad, counter)


def test_the_fingerprint_holds_the_content_hash_not_the_path() -> None:
    data = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    data["workload"]["dataset"] = {"kind": "sharegpt", "path": "a/conv.json", "sha256": "0" * 64}
    a = Spec.model_validate(data)
    data["workload"]["dataset"]["path"] = "/elsewhere/conv.json"
    assert fingerprint(Spec.model_validate(data)) == fingerprint(a)
    data["workload"]["dataset"]["sha256"] = "1" * 64
    assert fingerprint(Spec.model_validate(data)) != fingerprint(a)


def test_collect_replays_the_dataset_on_the_chat_api(tmp_path: Path) -> None:
    spec_path = _spec(tmp_path)
    out = tmp_path / "run.json"
    sim = start_sim("--profile", "fp8-kv", "--seed", "0")
    try:
        cmd = [sys.executable, "-m", "tokenwatt", "collect", "--spec", str(spec_path)]
        cmd += ["--label", "ds", "--role", "baseline", "--out", str(out)]
        cmd += ["--endpoint", sim.endpoint, "--no-progress", "--no-accuracy"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=240, check=False
        )
    finally:
        sim.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    record = RunRecord.model_validate_json(out.read_text(encoding="utf-8"))
    digest = hashlib.sha256((tmp_path / "conv.json").read_bytes()).hexdigest()
    assert record.spec.workload.dataset is not None
    assert record.spec.workload.dataset.sha256 == digest
    assert record.prompts is not None
    assert record.prompts.dataset == DatasetStats(
        kind="sharegpt",
        sha256=digest,
        entries=6,
        used=2,
        skipped=SKIPPED,
        prompt_tokens=11,
        output_tokens=12,
    )
    with gzip.open(out.with_name("run.requests.jsonl.gz"), "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert rows
    # The sim counts a chat prompt as ceil(characters / 4) tokens: FIRST 23 characters → 6,
    # SECOND 30 → 8; every request asked for its reply's length and got it (ignore_eos).
    expected = {5: (math.ceil(len(FIRST) / 4), 8), 6: (math.ceil(len(SECOND) / 4), 4)}
    done_rows = [r for r in rows if r["error"] is None]
    assert done_rows
    for row in done_rows:
        assert row["prompt"] == "text"
        assert (row["input_tokens"], row["output_tokens"]) == expected[row["prompt_text_tokens"]]
    # In order: the first window's first requests alternate between the two entries.
    first = sorted(
        (r for r in rows if (r["kind"], r["index"]) == ("probe", 0)), key=lambda r: r["scheduled_s"]
    )
    assert [r["prompt_text_tokens"] for r in first[:4]] == [5, 6, 5, 6]
