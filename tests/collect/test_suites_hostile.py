"""``tokenwatt suites`` with hostile or careless input: an --out that is one of the splits,
an --out that is a folder, lines nested too deeply, a train split too short, a mirror that
sends more than the pinned file. Each is a clear error; nothing is destroyed or left."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from click.testing import CliRunner

from tokenwatt.cli import cli
from tokenwatt.collect import suites
from tokenwatt.collect.suites import FetchError, PinnedFile, build_suite_file, load_suite
from tokenwatt.errors import InputError


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
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/data"
    finally:
        await runner.cleanup()


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
