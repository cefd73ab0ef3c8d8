"""GSM8K suites: the pinned source files, a deterministic 5-shot build, and fetch."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from click.testing import CliRunner

from tests.gsm8k_splits import Gsm8kSplits
from tokenwatt.cli import cli
from tokenwatt.collect.accuracy import suites
from tokenwatt.collect.accuracy.suites import (
    GSM8K_FILES,
    FetchError,
    PinnedFile,
    build_gsm8k_suite,
    build_suite_file,
    fetch_gsm8k,
    five_shot_prompt,
    gold_from_answer,
    load_suite,
    read_gsm8k,
)
from tokenwatt.errors import InputError

# The tests run on the committed excerpt (tests/fixtures/gsm8k: 45 test rows, 5 train rows);
# only the check of the full test split against its pin needs the shared copy.


def pinned(name: str) -> PinnedFile:
    return next(p for p in GSM8K_FILES if p.name == name)


def pin_of(name: str, path: Path) -> PinnedFile:
    """A pin for ``path``'s bytes under the upstream ``name``: the excerpt stands in."""
    data = path.read_bytes()
    return PinnedFile(name, hashlib.sha256(data).hexdigest(), len(data), data.count(b"\n"))


@pytest.mark.shared
def test_the_shared_test_split_is_the_pinned_upstream_file(gsm8k_full: Gsm8kSplits) -> None:
    data = gsm8k_full.test.read_bytes()
    pin = pinned("test.jsonl")
    assert hashlib.sha256(data).hexdigest() == pin.sha256
    assert len(data) == pin.size_bytes
    assert data.count(b"\n") == pin.lines == 1319


def test_the_excerpt_is_the_first_rows_of_the_pinned_splits(gsm8k: Gsm8kSplits) -> None:
    """45 + 5 rows; the hashes are those of the first lines of the pinned upstream files."""
    test, train = gsm8k.test.read_bytes(), gsm8k.train.read_bytes()
    assert (test.count(b"\n"), train.count(b"\n")) == (45, 5)
    assert hashlib.sha256(test).hexdigest() == (
        "451bd9c9065551732734647b86df4e9d6b79482ae48d620fb1e3f4baea5d57f7"
    )
    assert read_gsm8k(gsm8k.test)[0].question.startswith("Janet\u2019s ducks lay 16 eggs")


def build(gsm8k: Gsm8kSplits, out: Path, *, n: int = 30, seed: int = 0) -> bytes:
    build_suite_file(gsm8k.test, gsm8k.train, n, seed, out)
    return out.read_bytes()


def test_same_inputs_and_seed_give_the_same_bytes(gsm8k: Gsm8kSplits, tmp_path: Path) -> None:
    first = build(gsm8k, tmp_path / "a.jsonl")
    second = build(gsm8k, tmp_path / "b.jsonl")
    assert first == second
    other = build(gsm8k, tmp_path / "c.jsonl", seed=1)
    assert other != first


def test_suite_items_are_a_sorted_sample_with_gold_from_the_test_split(
    gsm8k: Gsm8kSplits, tmp_path: Path
) -> None:
    build(gsm8k, tmp_path / "s.jsonl")
    items = load_suite(tmp_path / "s.jsonl")
    assert len(items) == 30
    ids = [it.id for it in items]
    assert ids == sorted(ids) and len(set(ids)) == 30
    test_rows = read_gsm8k(gsm8k.test)
    for it in items:
        index = int(it.id.removeprefix("gsm8k-test-"))
        row = test_rows[index]
        assert it.question == row.question
        assert it.gold == row.answer.rsplit("####", 1)[1].strip().replace(",", "")
    # Janet's ducks (line 0) is not necessarily in; but every gold parses as a number.
    assert all(re.fullmatch(r"-?\d+(\.\d+)?", it.gold) for it in items)


def test_every_prompt_is_five_shot_and_ends_with_the_open_question(
    gsm8k: Gsm8kSplits, tmp_path: Path
) -> None:
    build(gsm8k, tmp_path / "s.jsonl", n=20)
    items = load_suite(tmp_path / "s.jsonl")
    train = read_gsm8k(gsm8k.train)
    train_questions = {r.question for r in train}
    prefixes = set()
    for it in items:
        blocks = it.prompt.split("\n\n")
        assert len(blocks) == 6
        for block in blocks[:5]:
            assert block.startswith("Question: ")
            question, answer = block.removeprefix("Question: ").split("\nAnswer: ", 1)
            assert question in train_questions
            assert re.search(r"\n#### -?[\d.]+$", answer)
            assert "<<" not in answer  # calculator annotations removed
        assert blocks[5] == f"Question: {it.question.strip()}\nAnswer:"
        assert it.prompt.endswith("\nAnswer:")
        prefixes.add(it.prompt[: it.prompt.rindex("Question: ")])
    assert len(prefixes) == 1  # the same five exemplars for the whole suite


def test_the_file_is_one_compact_json_object_per_line(gsm8k: Gsm8kSplits, tmp_path: Path) -> None:
    data = build(gsm8k, tmp_path / "s.jsonl", n=3)
    lines = data.decode("utf-8").split("\n")
    assert lines[-1] == "" and len(lines) == 4
    for line in lines[:3]:
        assert list(json.loads(line)) == ["id", "question", "prompt", "gold"]


def test_exemplar_shape_on_a_known_row() -> None:
    row = suites.GsmExample(
        "Weng earns $12 an hour. How much for 50 minutes?",
        "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\nShe earned 0.2 x 50 = $<<0.2*50=10>>10."
        "\n#### 10",
    )
    prompt = five_shot_prompt([row] * 5, "  Sam has 3 pens. How many?  ")
    assert prompt.startswith(
        "Question: Weng earns $12 an hour. How much for 50 minutes?\n"
        "Answer: Weng earns 12/60 = $0.2 per minute.\nShe earned 0.2 x 50 = $10.\n#### 10\n\n"
    )
    assert prompt.endswith("\n\nQuestion: Sam has 3 pens. How many?\nAnswer:")


def test_gold_from_answer_removes_commas_and_rejects_non_numbers() -> None:
    assert gold_from_answer("so 1,000 + 234\n#### 1,234") == "1234"
    assert gold_from_answer("#### -3") == "-3"
    with pytest.raises(ValueError, match="no '####'"):
        gold_from_answer("the answer is 5")
    with pytest.raises(ValueError, match="not a number"):
        gold_from_answer("#### five")


def test_n_out_of_range_and_short_train_are_refused() -> None:
    rows = [suites.GsmExample(f"q{i}", f"a\n#### {i}") for i in range(4)]
    with pytest.raises(ValueError, match="between 1 and 4"):
        build_gsm8k_suite(rows, rows * 2, 5, 0)
    with pytest.raises(ValueError, match="at least 5"):
        build_gsm8k_suite(rows, rows, 2, 0)


def test_malformed_split_names_file_and_line_and_writes_nothing(tmp_path: Path) -> None:
    test = tmp_path / "test.jsonl"
    test.write_text(
        '{"question": "q", "answer": "a\\n#### 1"}\nnot json\n{"question": "q"}\n'
        '{"question": "q", "answer": "no marker"}\n',
        encoding="utf-8",
    )
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"previous")
    with pytest.raises(InputError) as err:
        build_suite_file(test, test, 1, 0, out)
    fields = [p.field for p in err.value.problems]
    assert fields == ["line 2", "line 3.answer", "line 4.answer"]
    assert all(p.file == str(test) for p in err.value.problems)
    assert out.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "test.jsonl"]


def test_load_suite_checks_each_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good = {"id": "a", "question": "q", "prompt": "p", "gold": "1"}
    lines = [good, {**good, "gold": "x"}, {**good, "prompt": ""}, good]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_suite(path)
    assert [p.field for p in err.value.problems] == ["line 2.gold", "line 3.prompt", "line 4.id"]


def test_cli_build_writes_the_suite_and_reports_its_hash(
    gsm8k: Gsm8kSplits, tmp_path: Path
) -> None:
    out = tmp_path / "suites" / "gsm8k-30.jsonl"
    args = ["suites", "build", "gsm8k", "--test", str(gsm8k.test)]
    args += ["--train", str(gsm8k.train), "--n", "30", "--seed", "0"]
    result = CliRunner().invoke(cli, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert hashlib.sha256(out.read_bytes()).hexdigest() in result.output
    assert "30 items" in result.output


def test_cli_build_bad_n_exits_2(gsm8k: Gsm8kSplits, tmp_path: Path) -> None:
    args = ["suites", "build", "gsm8k", "--test", str(gsm8k.test)]
    args += ["--train", str(gsm8k.train), "--n", "5000"]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "s.jsonl")])
    assert result.exit_code == 2
    assert "--n" in result.output and "between 1 and 45" in result.output
    assert not (tmp_path / "s.jsonl").exists()


def test_cli_fetch_offline_fails_cleanly(tmp_path: Path, unused_tcp_port: int) -> None:
    dest = tmp_path / "gsm8k"
    url = f"http://127.0.0.1:{unused_tcp_port}/data"
    result = CliRunner().invoke(
        cli, ["suites", "fetch", "gsm8k", "--dest", str(dest), "--base-url", url]
    )
    assert result.exit_code == 1
    assert "cannot download" in result.output and "test.jsonl" in result.output
    assert "ConnectError" in result.output
    assert list(dest.iterdir()) == []


@pytest.fixture
async def mirror(gsm8k: Gsm8kSplits) -> AsyncIterator[str]:
    """A GSM8K mirror on 127.0.0.1 serving the excerpt's test and train rows."""
    files = {"test.jsonl": gsm8k.test.read_bytes(), "train.jsonl": gsm8k.train.read_bytes()}

    async def serve(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in files:
            return web.Response(status=404)
        return web.Response(body=files[name])

    app = web.Application()
    app.router.add_get("/data/{name}", serve)
    http = TestServer(app, host="127.0.0.1", port=0)
    await http.start_server()
    try:
        yield str(http.make_url("/data"))
    finally:
        await http.close()


async def test_fetch_verifies_the_pinned_hashes(
    mirror: str, tmp_path: Path, gsm8k: Gsm8kSplits, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The test split's pin is the excerpt's; the train split keeps the real upstream pin,
    # which the mirror's 5 train rows cannot match.
    test_pin = pin_of("test.jsonl", gsm8k.test)
    monkeypatch.setattr(suites, "GSM8K_FILES", (test_pin, pinned("train.jsonl")))
    dest = tmp_path / "gsm8k"
    with pytest.raises(FetchError, match="does not match the pinned"):
        await asyncio.to_thread(fetch_gsm8k, dest, base_url=mirror)
    # The test split was verified and kept; no train file and no temporary file remain.
    assert sorted(p.name for p in dest.iterdir()) == ["test.jsonl"]
    assert hashlib.sha256((dest / "test.jsonl").read_bytes()).hexdigest() == test_pin.sha256


async def test_fetch_keeps_verified_files_and_downloads_the_rest(
    mirror: str, tmp_path: Path, gsm8k: Gsm8kSplits, monkeypatch: pytest.MonkeyPatch
) -> None:
    pins = (pin_of("test.jsonl", gsm8k.test), pin_of("train.jsonl", gsm8k.train))
    monkeypatch.setattr(suites, "GSM8K_FILES", pins)
    dest = tmp_path / "gsm8k"
    dest.mkdir()
    (dest / "test.jsonl").write_bytes(gsm8k.test.read_bytes())
    got = await asyncio.to_thread(fetch_gsm8k, dest, base_url=mirror)
    assert [(g.path.name, g.already_present) for g in got] == [
        ("test.jsonl", True),
        ("train.jsonl", False),
    ]
    assert (dest / "train.jsonl").read_bytes() == gsm8k.train.read_bytes()


async def test_fetch_reports_an_http_error_status(mirror: str, tmp_path: Path) -> None:
    with pytest.raises(FetchError, match="HTTP 404"):
        await asyncio.to_thread(fetch_gsm8k, tmp_path, base_url=mirror + "/missing")


def test_cli_fetch_into_a_file_is_an_input_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    result = CliRunner().invoke(cli, ["suites", "fetch", "gsm8k", "--dest", str(blocker / "sub")])
    assert result.exit_code == 2
    assert "--dest" in result.output and "cannot create" in result.output


# ``tokenwatt suites`` with hostile or careless input: an --out that is one of the splits, an
# --out that is a folder, lines nested too deeply, a train split too short, a mirror that sends
# more than the pinned file. Each is a clear error; nothing is destroyed or left.


def _split(path: Path, rows: int) -> Path:
    lines = [
        json.dumps({"question": f"What is {i} + 1?", "answer": f"{i} + 1 = {i + 1}\n#### {i + 1}"})
        for i in range(rows)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("which", ["--test", "--train"])
def test_out_that_is_a_split_is_refused_and_the_split_kept(tmp_path: Path, which: str) -> None:
    test = _split(tmp_path / "test.jsonl", 30)
    train = _split(tmp_path / "train.jsonl", 10)
    target = test if which == "--test" else train
    before = target.read_bytes()
    result = CliRunner().invoke(
        cli,
        [
            "suites",
            "build",
            "gsm8k",
            "--test",
            str(test),
            "--train",
            str(train),
            "--n",
            "5",
            "--out",
            str(target),
        ],
    )
    assert result.exit_code == 2, result.output
    assert f"error: {target}: --out: is the {which} split" in result.output
    assert target.read_bytes() == before


def test_out_that_is_a_folder_is_an_input_error(tmp_path: Path) -> None:
    test = _split(tmp_path / "test.jsonl", 30)
    train = _split(tmp_path / "train.jsonl", 10)
    (tmp_path / "out").mkdir()
    with pytest.raises(InputError) as exc:
        build_suite_file(test, train, 5, 0, tmp_path / "out")
    assert [str(p) for p in exc.value.problems] == [
        f"{tmp_path / 'out'}: --out: cannot write the suite: it is a folder"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "test.jsonl", "train.jsonl"]
    assert list((tmp_path / "out").iterdir()) == []


def test_short_train_split_names_the_train_file(tmp_path: Path) -> None:
    test = _split(tmp_path / "test.jsonl", 30)
    train = _split(tmp_path / "train.jsonl", 3)
    with pytest.raises(InputError) as exc:
        build_suite_file(test, train, 5, 0, tmp_path / "s.jsonl")
    assert [str(p) for p in exc.value.problems] == [
        f"{train}: the train split needs at least 5 rows (the exemplars), has 3"
    ]


def test_n_out_of_range_names_the_test_split(tmp_path: Path) -> None:
    test = _split(tmp_path / "test.jsonl", 30)
    train = _split(tmp_path / "train.jsonl", 10)
    with pytest.raises(InputError) as exc:
        build_suite_file(test, train, 31, 0, tmp_path / "s.jsonl")
    assert [str(p) for p in exc.value.problems] == [
        f"{test}: --n: n must be between 1 and 30 (the test split), got 31"
    ]


def test_deeply_nested_lines_are_named_not_a_crash(tmp_path: Path) -> None:
    split = _split(tmp_path / "test.jsonl", 3)
    with split.open("a", encoding="utf-8") as fh:
        fh.write("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(InputError) as exc:
        build_suite_file(split, split, 1, 0, tmp_path / "s.jsonl")
    assert [str(p) for p in exc.value.problems] == [
        f"{split}: line 4: not a row: nested too deeply, or a number of thousands of digits"
    ]
    suite = tmp_path / "suite.jsonl"
    suite.write_text("[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_suite(suite)
    assert [p.field for p in exc.value.problems] == ["line 1"]


@pytest.fixture
async def flood() -> AsyncIterator[str]:
    """A "mirror" on 127.0.0.1 that answers every file with 4 MB of one byte."""

    async def serve(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * 4_000_000)

    app = web.Application()
    app.router.add_get("/data/{name}", serve)
    http = TestServer(app, host="127.0.0.1", port=0)
    await http.start_server()
    try:
        yield str(http.make_url("/data"))
    finally:
        await http.close()


async def test_fetch_stops_at_the_pinned_size(
    flood: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mirror sending more than the pinned size is cut off, not stored to the end."""
    small = PinnedFile("test.jsonl", "0" * 64, 1_000, 10)
    monkeypatch.setattr(suites, "GSM8K_FILES", (small,))
    dest = tmp_path / "gsm8k"
    with pytest.raises(FetchError, match="more than the pinned 1,000 bytes; stopped"):
        await asyncio.to_thread(suites.fetch_gsm8k, dest, base_url=flood)
    assert list(dest.iterdir()) == []


async def test_fetch_into_a_folder_where_the_file_goes_is_an_input_error(
    flood: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bytes verify, but a folder sits where the file goes: exit 2, no temporary file."""
    body = b"x" * 4_000_000
    pin = PinnedFile("test.jsonl", hashlib.sha256(body).hexdigest(), len(body), 0)
    monkeypatch.setattr(suites, "GSM8K_FILES", (pin,))
    dest = tmp_path / "gsm8k"
    (dest / "test.jsonl").mkdir(parents=True)
    with pytest.raises(InputError) as exc:
        await asyncio.to_thread(suites.fetch_gsm8k, dest, base_url=flood)
    assert [str(p) for p in exc.value.problems] == [
        f"{dest / 'test.jsonl'}: --dest: cannot write: a folder is in the way"
    ]
    assert sorted(p.name for p in dest.iterdir()) == ["test.jsonl"]
