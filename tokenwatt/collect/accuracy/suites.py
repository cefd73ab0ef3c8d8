"""Accuracy suites: fetch GSM8K, build a seeded 5-shot suite file, read it back.

A suite file is JSON Lines, one item per line (:mod:`tokenwatt.records.spec.suite` reads and
writes it; the simulated engine answers from it)::

    {"id": "gsm8k-test-0042", "question": "...", "prompt": "...", "gold": "18"}

``prompt`` is the full 5-shot prompt ending in ``Question: <q>\\nAnswer:``; ``gold`` the gold
number as text (what follows ``####`` in the GSM8K answer, commas removed). The data is
GSM8K (Cobbe et al. 2021, MIT licence), downloaded on the user's machine and never
committed into this repository.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from pathlib import Path

from tokenwatt.errors import InputError, Problem, TokenwattError
from tokenwatt.files import atomic_file, atomic_write_bytes, file_sha256, same_file
from tokenwatt.records import (
    GOLD,
    MAX_PROBLEMS,
    SuiteItem,
    json_object_lines,
)
from tokenwatt.records import load_suite as load_suite
from tokenwatt.records import suite_bytes as suite_bytes

# The public GSM8K repository (archived), pinned to a commit so the bytes cannot move.
GSM8K_COMMIT = "3101c7d5072418e28b9008a6636bde82a006892c"
GSM8K_BASE_URL = (
    f"https://raw.githubusercontent.com/openai/grade-school-math/{GSM8K_COMMIT}"
    "/grade_school_math/data"
)


@dataclass(frozen=True)
class PinnedFile:
    """A file of the GSM8K repository with its size (bytes), line count and SHA-256."""

    name: str
    sha256: str
    size_bytes: int
    lines: int


# test.jsonl: hashed here from /work/shared/data/gsm8k/test.jsonl (1,319 lines, 749,738
# bytes), which matches the hash many public projects pin for the upstream file.
# train.jsonl: only its first 200 lines were at hand, so its hash comes from public
# sources that pin the upstream file (the same SHA-256, 4,166,206 bytes and 7,473 lines in
# several independent projects); `fetch` verifies it like the test file.
GSM8K_FILES = (
    PinnedFile(
        "test.jsonl",
        "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
        749_738,
        1_319,
    ),
    PinnedFile(
        "train.jsonl",
        "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465",
        4_166_206,
        7_473,
    ),
)

SHOTS = 5
"""Exemplars in each prompt (the common GSM8K 5-shot setting)."""

_CALCULATOR = re.compile(r"<<[^<>]*>>")


class FetchError(TokenwattError):
    """A suite's source files could not be downloaded or did not match their pinned hash."""


@dataclass(frozen=True)
class GsmExample:
    """One GSM8K row: question and its worked answer ending in ``#### N``."""

    question: str
    answer: str


def gold_from_answer(answer: str) -> str:
    """The gold number of a GSM8K answer: the text after the last ``####``, commas removed.

    Raises:
        ValueError: no ``####`` or no plain number after it.
    """
    if "####" not in answer:
        raise ValueError("answer has no '####' line")
    gold = answer.rsplit("####", 1)[1].strip().replace(",", "")
    if not GOLD.match(gold):
        raise ValueError(f"the text after '####' is not a number: {gold!r}")
    return gold


def exemplar_text(example: GsmExample) -> str:
    """One exemplar in the common form ``Question: …\\nAnswer: … #### N``.

    GSM8K's calculator annotations (``<<48/2=24>>``) are removed: they are a training aid
    of the dataset, not text a model should imitate.
    """
    answer = _CALCULATOR.sub("", example.answer).strip()
    return f"Question: {example.question.strip()}\nAnswer: {answer}"


def five_shot_prompt(exemplars: list[GsmExample], question: str) -> str:
    """The few-shot prompt: exemplars separated by blank lines, then the open question."""
    parts = [exemplar_text(e) for e in exemplars]
    parts.append(f"Question: {question.strip()}\nAnswer:")
    return "\n\n".join(parts)


def read_gsm8k(path: Path) -> list[GsmExample]:
    """Read a GSM8K JSON Lines file (``question``, ``answer`` per line).

    Raises:
        InputError: unreadable file, a line that is not JSON, or a missing/bad field (every
            problem named by file and ``line N.field``).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError([Problem(str(path), "", f"cannot read: {exc}")]) from exc
    rows: list[GsmExample] = []
    problems: list[Problem] = []
    for where, row in json_object_lines(path, text, problems):
        bad = [k for k in ("question", "answer") if not isinstance(row.get(k), str)]
        for key in bad:
            problems.append(Problem(str(path), f"{where}.{key}", "missing or not a string"))
        if bad:
            continue
        try:
            gold_from_answer(row["answer"])
        except ValueError as exc:
            problems.append(Problem(str(path), f"{where}.answer", str(exc)))
            continue
        rows.append(GsmExample(row["question"], row["answer"]))
    if problems:
        raise InputError(problems[:MAX_PROBLEMS])
    if not rows:
        raise InputError([Problem(str(path), "", "holds no GSM8K rows")])
    return rows


def build_gsm8k_suite(
    test: list[GsmExample], train: list[GsmExample], n: int, seed: int
) -> list[SuiteItem]:
    """A seeded sample of ``n`` test items, each with the same five train exemplars.

    One ``random.Random(seed)`` draws the test indices (then sorted, so the file reads in
    the split's order) and then the five exemplar indices; ids are ``gsm8k-test-NNNN``, the
    item's zero-based line in the test split.

    Raises:
        ValueError: ``n`` outside 1..len(test), or fewer than five train rows.
    """
    if not 1 <= n <= len(test):
        raise ValueError(f"n must be between 1 and {len(test)} (the test split), got {n}")
    if len(train) < SHOTS:
        raise ValueError(f"the train split needs at least {SHOTS} rows, has {len(train)}")
    rng = random.Random(seed)
    picked = sorted(rng.sample(range(len(test)), n))
    exemplars = [train[i] for i in rng.sample(range(len(train)), SHOTS)]
    return [
        SuiteItem(
            id=f"gsm8k-test-{i:04d}",
            question=test[i].question,
            prompt=five_shot_prompt(exemplars, test[i].question),
            gold=gold_from_answer(test[i].answer),
        )
        for i in picked
    ]


@dataclass(frozen=True)
class BuiltSuite:
    """What ``suites build`` wrote: path, item count and the SHA-256 of inputs and output."""

    path: Path
    items: int
    sha256: str
    test_sha256: str
    train_sha256: str


def build_suite_file(test_path: Path, train_path: Path, n: int, seed: int, out: Path) -> BuiltSuite:
    """Build a GSM8K 5-shot suite from the two split files and write it atomically.

    Same inputs and seed give byte-identical output.

    Raises:
        InputError: unreadable or malformed input files, or ``n`` out of range.
    """
    for given, flag in ((test_path, "--test"), (train_path, "--train")):
        if same_file(out, given):
            raise InputError(
                [
                    Problem(
                        str(out),
                        "--out",
                        f"is the {flag} split; writing the suite there would destroy it "
                        "(choose another --out)",
                    )
                ]
            )
    test = read_gsm8k(test_path)
    train = read_gsm8k(train_path)
    if len(train) < SHOTS:
        raise InputError(
            [
                Problem(
                    str(train_path),
                    "",
                    f"the train split needs at least {SHOTS} rows (the exemplars), "
                    f"has {len(train)}",
                )
            ]
        )
    try:
        items = build_gsm8k_suite(test, train, n, seed)
    except ValueError as exc:
        raise InputError([Problem(str(test_path), "--n", str(exc))]) from exc
    data = suite_bytes(items)
    try:
        atomic_write_bytes(out, data)
    except OSError as exc:
        why = "it is a folder" if out.is_dir() else str(exc.strerror or exc)
        raise InputError([Problem(str(out), "--out", f"cannot write the suite: {why}")]) from exc
    return BuiltSuite(
        out,
        len(items),
        hashlib.sha256(data).hexdigest(),
        file_sha256(test_path),
        file_sha256(train_path),
    )


def _cannot_write(path: Path, exc: OSError) -> InputError:
    """The error for a download that cannot be stored under ``--dest``."""
    why = "a folder is in the way" if path.is_dir() else str(exc.strerror or exc)
    return InputError([Problem(str(path), "--dest", f"cannot write: {why}")])


@dataclass(frozen=True)
class FetchedFile:
    """A verified download: where it lies, its SHA-256, and whether it was already there."""

    path: Path
    sha256: str
    already_present: bool


def fetch_gsm8k(
    dest: Path, *, base_url: str = GSM8K_BASE_URL, timeout_s: float = 60.0
) -> list[FetchedFile]:
    """Download GSM8K's ``test.jsonl`` and ``train.jsonl`` into ``dest``, verified by SHA-256.

    Each file is streamed to a temporary file beside its destination, checked against its
    pinned size and SHA-256 (:data:`GSM8K_FILES`) and only then renamed into place; a file
    already in ``dest`` with the right hash is kept without a download.

    Args:
        dest: folder to write to (created if missing).
        base_url: where the two files lie; default the pinned upstream commit. A mirror's
            files must have the same bytes.
        timeout_s: per-request timeout (s).

    Raises:
        FetchError: the server cannot be reached (offline), answers with an error status,
            or sends bytes that do not match the pinned hash. Nothing partial is left.
        InputError: ``dest`` cannot be created (e.g. it is a file) or written (full,
            read-only, a folder where a file goes). Nothing partial is left.
    """
    import httpx

    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            [Problem(str(dest), "--dest", f"cannot create the folder: {exc}")]
        ) from exc
    done: list[FetchedFile] = []
    for pinned in GSM8K_FILES:
        target = dest / pinned.name
        if target.is_file() and file_sha256(target) == pinned.sha256:
            done.append(FetchedFile(target, pinned.sha256, True))
            continue
        url = f"{base_url.rstrip('/')}/{pinned.name}"
        try:
            _download(url, pinned, target, timeout_s)
        except OSError as exc:  # disk full, read-only, a folder where the file goes
            raise _cannot_write(target, exc) from exc
        except httpx.HTTPError as exc:
            raise FetchError(
                f"cannot download {url}: {type(exc).__name__}: {exc or 'no detail'}. "
                f"Offline? Copy {pinned.name} from github.com/openai/grade-school-math "
                f"(grade_school_math/data) into {dest} by hand; SHA-256 {pinned.sha256}"
            ) from exc
        done.append(FetchedFile(target, pinned.sha256, False))
    return done


def _download(url: str, pinned: PinnedFile, target: Path, timeout_s: float) -> None:
    """Stream ``url`` into ``target`` (:func:`tokenwatt.files.atomic_file`), stopping past
    the pinned size; ``target`` is replaced only when size and SHA-256 match the pin.

    Raises:
        FetchError: an error status, too many bytes, or a hash that does not match.
        OSError: the file cannot be written.
        httpx.HTTPError: the transfer failed.
    """
    import httpx

    digest = hashlib.sha256()
    size = 0
    with (
        atomic_file(target) as fh,
        httpx.stream("GET", url, timeout=timeout_s, follow_redirects=True) as response,
    ):
        if response.status_code != 200:
            raise FetchError(f"cannot download {url}: HTTP {response.status_code}")
        for chunk in response.iter_bytes():
            digest.update(chunk)
            size += len(chunk)
            if size > pinned.size_bytes:
                raise FetchError(
                    f"{url}: more than the pinned {pinned.size_bytes:,} bytes; stopped "
                    "(not the pinned file); nothing was written"
                )
            fh.write(chunk)
        actual = digest.hexdigest()
        if actual != pinned.sha256:
            raise FetchError(
                f"{url}: SHA-256 {actual} ({size:,} bytes) does not match the pinned "
                f"{pinned.sha256} ({pinned.size_bytes:,} bytes); nothing was written"
            )
