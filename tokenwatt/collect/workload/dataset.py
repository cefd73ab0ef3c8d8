"""Conversation datasets replayed as the workload: ShareGPT-format files.

A ShareGPT file is a JSON list of ``{"id": ..., "conversations": [{"from": "human" |
"gpt", "value": text}, ...]}``. Each usable entry becomes one request: its first human turn
is the prompt (text), and the length in tokens of the gpt reply that follows it, counted
with the model's own tokenizer (``model.tokenizer``), is the output length asked for.

Entries are filtered as vLLM's ``bench serve`` ShareGPT dataset does
(``vllm/benchmarks/datasets``: ``ShareGPTDataset.sample`` with ``is_valid_sequence``): an
entry needs a prompt and a reply, and both of at least :data:`MIN_TOKENS` tokens; a prompt
plus reply that does not fit the engine's context is skipped too (vLLM's fixed 1,024 /
2,048-token caps were sized for 2k-context models: the context the engine reports is used
instead). Malformed entries are skipped and counted by reason, never sent — an entry whose
text holds a lone surrogate (``"\\ud800"``) among them; a file with no usable entry is
refused.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenwatt.collect.workload.prompts import RequestSpec
from tokenwatt.errors import InputError, Problem
from tokenwatt.files import check_regular_file
from tokenwatt.records import Spec
from tokenwatt.text import has_lone_surrogate

MIN_TOKENS = 4
"""Shortest prompt and reply kept (tokens): vLLM's ``is_valid_sequence`` ``min_len``."""
MAX_DATASET_BYTES = 1 << 30
"""Largest dataset file read (1 GiB): it is read whole, before the first request."""
FIELD = "workload.dataset"
LONE_SURROGATE = "text with a lone surrogate (not valid Unicode)"
"""Why an entry whose prompt or reply holds a ``"\\ud800"``-style escape is skipped: it is
not text a tokenizer or a server can take, and replacing it would send another prompt."""


@dataclass
class DatasetLoad:
    """A dataset as read: the requests to replay and what was left out.

    Attributes:
        entries: one request per usable entry, in file order (text prompt, exact
            ``max_tokens``, the entry's id, the prompt's length by the tokenizer).
        total: entries in the file.
        skipped: entries left out, by reason (e.g. ``"no gpt reply"``).
        sha256: SHA-256 (hex) of the file's bytes.
    """

    entries: list[RequestSpec]
    total: int
    skipped: dict[str, int] = field(default_factory=dict)
    sha256: str = ""


def dataset_path(spec: Spec, base_dir: str | Path | None) -> Path:
    """The dataset file: as written when absolute, else relative to ``base_dir`` (the
    spec file's folder)."""
    assert spec.workload.dataset is not None
    path = Path(spec.workload.dataset.path).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    return path


def _read(path: Path, file: str) -> bytes:
    try:
        check_regular_file(path, what="dataset", max_bytes=MAX_DATASET_BYTES)
        return path.read_bytes()
    except InputError as exc:
        raise InputError([Problem(file, FIELD, p.message) for p in exc.problems]) from None
    except OSError as exc:
        raise InputError([Problem(file, FIELD, f"cannot read {path}: {exc}")]) from None


def pin_dataset(spec: Spec, spec_path: Path) -> Spec:
    """The spec with ``workload.dataset.sha256`` set to the file's hash (unchanged without
    a dataset), checked before the engine is even asked.

    Raises:
        InputError: the file is missing, not a plain file or too large, or its hash is not
            the one the spec gives (naming the spec file and ``workload.dataset``).
    """
    ds = spec.workload.dataset
    if ds is None:
        return spec
    path = dataset_path(spec, spec_path.parent)
    digest = hashlib.sha256(_read(path, str(spec_path))).hexdigest()
    if ds.sha256 is not None and ds.sha256 != digest:
        message = f"{path} has SHA-256 {digest}, not the {ds.sha256} the spec gives"
        raise InputError([Problem(str(spec_path), f"{FIELD}.sha256", message)])
    dataset = ds.model_copy(update={"sha256": digest})
    workload = spec.workload.model_copy(update={"dataset": dataset})
    return spec.model_copy(update={"workload": workload})


def _turns(entry: Any) -> tuple[str, str] | str:
    """(prompt, reply) of one entry, or why it is skipped."""
    if not isinstance(entry, dict):
        return "not an object"
    turns = entry.get("conversations")
    if not isinstance(turns, list):
        return "no conversations list"
    ok = [t for t in turns if isinstance(t, dict) and isinstance(t.get("value"), str)]
    if len(ok) != len(turns):
        return "a turn without from and text value"
    first = next((i for i, t in enumerate(ok) if t.get("from") == "human"), None)
    if first is None or not ok[first]["value"].strip():
        return "no human turn"
    reply = next((t for t in ok[first + 1 :] if t.get("from") == "gpt"), None)
    if reply is None or not reply["value"].strip():
        return "no gpt reply"
    if has_lone_surrogate(ok[first]["value"]) or has_lone_surrogate(reply["value"]):
        return LONE_SURROGATE
    return ok[first]["value"], reply["value"]


def load_sharegpt(
    path: Path,
    count_tokens: Callable[[str], int],
    *,
    max_total_tokens: int | None = None,
    file: str | None = None,
) -> DatasetLoad:
    """Read a ShareGPT-format file into requests (see the module docstring).

    Args:
        path: the file.
        count_tokens: the model's tokenizer
            (:class:`~tokenwatt.collect.workload.tokens.TokenCounter`).
        max_total_tokens: tokens a request (prompt + reply) may use, or None: unbounded.
        file: the name errors give (default: ``path``).

    Raises:
        InputError: the file is unreadable, not JSON, not a list, or has no usable entry
            (naming the file and ``workload.dataset``, with the counts skipped by reason).
    """
    where = file or str(path)
    raw = _read(path, where)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise InputError([Problem(where, FIELD, f"{path} is not valid JSON: {exc}")]) from None
    if not isinstance(data, list):
        raise InputError([Problem(where, FIELD, f"{path} must hold a JSON list of entries")])
    skipped: Counter[str] = Counter()
    entries: list[RequestSpec] = []
    for index, entry in enumerate(data):
        turns = _turns(entry)
        if isinstance(turns, str):
            skipped[turns] += 1
            continue
        prompt, reply = turns
        n_in, n_out = count_tokens(prompt), count_tokens(reply)
        if n_in < MIN_TOKENS or n_out < MIN_TOKENS:
            skipped[f"prompt or reply under {MIN_TOKENS} tokens"] += 1
            continue
        if max_total_tokens is not None and n_in + n_out > max_total_tokens:
            skipped["longer than the context"] += 1
            continue
        entry_id = entry.get("id")
        name = entry_id if isinstance(entry_id, str) else f"entry {index}"
        entries.append(RequestSpec(prompt=prompt, max_tokens=n_out, id=name, text_tokens=n_in))
    counts = dict(sorted(skipped.items()))
    if not entries:
        why = ", ".join(f"{n} {reason}" for reason, n in counts.items()) or "the list is empty"
        message = f"{path} has no usable ShareGPT entry ({len(data)} entries: {why})"
        raise InputError([Problem(where, FIELD, message)])
    digest = hashlib.sha256(raw).hexdigest()
    return DatasetLoad(entries=entries, total=len(data), skipped=counts, sha256=digest)
