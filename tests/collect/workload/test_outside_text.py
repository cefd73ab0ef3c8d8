"""Text the tool did not write: lone surrogates in datasets and server text, control
characters and escape sequences on their way to the terminal (tokenwatt.text)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.collect.workload.test_tokens import spec_with, word_level
from tokenwatt.collect.workload.dataset import LONE_SURROGATE, load_sharegpt
from tokenwatt.collect.workload.tokens import load_token_counter
from tokenwatt.errors import InputError
from tokenwatt.text import control_characters, terminal_safe, valid_json, valid_unicode

ENTRY_OK = {
    "id": "ok",
    "conversations": [
        {"from": "human", "value": "the quick brown fox jumps"},
        {"from": "gpt", "value": "over the lazy dog ."},
    ],
}


def _sharegpt(path: Path, *entries: object) -> Path:
    # json.dumps writes a lone surrogate as the "\ud800" escape, as a hostile file would.
    path.write_text(json.dumps(list(entries)), encoding="utf-8")
    return path


def test_a_lone_surrogate_in_a_sharegpt_entry_skips_that_entry(tmp_path: Path) -> None:
    counter = load_token_counter(spec_with(str(word_level(tmp_path / "tokenizer.json"))))
    assert counter is not None
    bad = {
        "id": "bad",
        "conversations": [
            {"from": "human", "value": "the quick \ud800 brown fox"},
            {"from": "gpt", "value": "over the lazy dog ."},
        ],
    }
    path = _sharegpt(tmp_path / "conv.json", bad, ENTRY_OK)
    assert "\\ud800" in path.read_text()
    loaded = load_sharegpt(path, counter)
    assert [e.id for e in loaded.entries] == ["ok"]
    assert loaded.skipped == {LONE_SURROGATE: 1}


def test_a_file_of_only_such_entries_is_refused_naming_the_reason(tmp_path: Path) -> None:
    counter = load_token_counter(spec_with(str(word_level(tmp_path / "tokenizer.json"))))
    assert counter is not None
    bad = {"conversations": [{"from": "human", "value": "\udfff"}, {"from": "gpt", "value": "x"}]}
    path = _sharegpt(tmp_path / "conv.json", bad)
    with pytest.raises(InputError) as caught:
        load_sharegpt(path, counter, file="ds.spec.yaml")
    (problem,) = caught.value.problems
    assert (problem.file, problem.field) == ("ds.spec.yaml", "workload.dataset")
    assert problem.message.endswith(f"has no usable ShareGPT entry (1 entries: 1 {LONE_SURROGATE})")


def test_the_token_counter_counts_server_text_with_a_lone_surrogate(tmp_path: Path) -> None:
    counter = load_token_counter(spec_with(str(word_level(tmp_path / "tokenizer.json"))))
    assert counter is not None
    # U+FFFD in its place: an unknown word of its own, one [UNK].
    assert counter.count("the \ud800 dog") == 3


def test_valid_unicode_and_json() -> None:
    assert valid_unicode("a\ud800b\udc00") == "a\ufffdb\ufffd"
    assert valid_unicode("emoji \U0001f600") == "emoji \U0001f600"
    decoded = json.loads('{"k\\ud800": ["\\udfff", 1, {"x": "\\ud83d\\ude00"}]}')
    assert valid_json(decoded) == {"k\ufffd": ["\ufffd", 1, {"x": "\U0001f600"}]}


def test_terminal_safe_shows_escapes_as_text() -> None:
    text = "ok\tline\nnext \x1b[2J\x1b]0;t\x07 \r\x08\x7f\x9b \u202e \ud800"
    assert terminal_safe(text) == (
        "ok\tline\nnext \\x1b[2J\\x1b]0;t\\x07 \\x0d\\x08\\x7f\\x9b \\u202e \ufffd"
    )


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("llama-3", None),
        ("a\tb", "\\x09"),
        ("a\nb", "\\x0a"),
        ("\x1b[31m", "\\x1b"),
        ("x\ud800", "\\ud800"),
        ("\u2066rtl", "\\u2066"),
    ],
)
def test_control_characters_in_a_name(text: str, found: str | None) -> None:
    assert control_characters(text) == found
