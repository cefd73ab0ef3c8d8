"""The token counter: a tokenizer the tests build, read from a file or a model folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from tokenwatt.collect.workload.tokens import load_token_counter
from tokenwatt.errors import InputError
from tokenwatt.records.spec.spec import Spec

SEED_SPEC = Path(__file__).resolve().parents[2] / "fixtures" / "seed.report.json"
WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog"]


def spec_with(tokenizer: str | None, vocab: int = 64) -> Spec:
    data = json.loads(SEED_SPEC.read_text())["spec"]
    data["model"]["tokenizer"] = tokenizer
    data["model"]["vocab_size"] = vocab
    return Spec.model_validate(data)


def word_level(path: Path) -> Path:
    """One token per known word, [UNK] for the rest: counts are known exactly."""
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(WORDS)}, ".": len(WORDS) + 1}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path))
    return path


def bpe(path: Path, vocab_size: int) -> Path:
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["[UNK]"], show_progress=False
    )
    tok.train_from_iterator([" ".join(WORDS)] * 50, trainer)
    tok.save(str(path))
    return path


def test_counts_are_the_tokenizers_own(tmp_path: Path) -> None:
    word_level(tmp_path / "tokenizer.json")
    counter = load_token_counter(spec_with(str(tmp_path / "tokenizer.json")))
    assert counter is not None
    assert counter.count("the quick brown fox") == 4
    assert counter("the lazy dog.") == 4  # '.' is a token of its own
    assert counter.count("") == 0
    assert counter.count("unknown words here") == 3  # one [UNK] each
    assert counter.vocab_size == 10


def test_a_model_folder_and_a_path_relative_to_the_spec(tmp_path: Path) -> None:
    folder = tmp_path / "models" / "m"
    folder.mkdir(parents=True)
    word_level(folder / "tokenizer.json")
    spec_file = tmp_path / "my.spec.yaml"
    counter = load_token_counter(spec_with("models/m"), spec_file)
    assert counter is not None and counter.path == folder / "tokenizer.json"
    assert counter.count("over the dog") == 3


def test_no_tokenizer_in_the_spec_gives_none() -> None:
    assert load_token_counter(spec_with(None)) is None


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: str(d / "missing.json"), "no such file or folder"),
        (lambda d: str(d), "has no tokenizer.json"),
        (lambda d: _write(d / "t.json", "not json {"), "not a tokenizer.json"),
        (lambda d: _write(d / "t.json", '{"version": "1.0"}'), "not a tokenizer.json"),
    ],
)
def test_bad_paths_and_files_name_the_spec_field(
    tmp_path: Path, setup: object, message: str
) -> None:
    value = setup(tmp_path)  # type: ignore[operator]
    with pytest.raises(InputError, match=message) as err:
        load_token_counter(spec_with(value), tmp_path / "x.spec.yaml")
    problem = err.value.problems[0]
    assert (problem.file, problem.field) == (str(tmp_path / "x.spec.yaml"), "model.tokenizer")


def test_another_models_larger_vocabulary_is_refused(tmp_path: Path) -> None:
    path = bpe(tmp_path / "tokenizer.json", 60)
    counter = load_token_counter(spec_with(str(path), vocab=100))
    assert counter is not None
    with pytest.raises(InputError, match=r"more than model.vocab_size \(11\)"):
        load_token_counter(spec_with(str(path), vocab=11))


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)
