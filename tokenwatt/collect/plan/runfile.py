"""Files and inputs of a collect run: the spec with its mode, the API key, the record file.

The run record is written atomically (temporary file in the same folder, then
``os.replace``): a reader never sees half a record, and a crash leaves the previous
checkpoint in place.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from tokenwatt.collect.engine.probes import EngineInfo
from tokenwatt.collect.plan.modes import Mode, apply_mode
from tokenwatt.collect.plan.point import check_endpoint_flag
from tokenwatt.collect.workload.trace import MAX_TRACE_BYTES, load_trace
from tokenwatt.collect.workload.workload import CHAT_MIX_V1
from tokenwatt.errors import InputError, Problem, named_by
from tokenwatt.files import atomic_write_text, check_regular_file, same_file
from tokenwatt.records import (
    MAX_LABEL_CHARS,
    MAX_WORKERS,
    EngineSpec,
    Environment,
    MeasurementSpec,
    ModelSpec,
    PlainName,
    RunRecord,
    Spec,
    clip_text,
    load_spec,
    swept_of_secrets,
    validate,
)


def write_record(record: RunRecord, out: Path, secrets: Sequence[str] = ()) -> None:
    """Write ``record`` to ``out`` atomically (:func:`tokenwatt.files.atomic_write_text`),
    over-long text cut and every form of each of ``secrets`` (the run's API key) removed
    from its text values (:func:`tokenwatt.records.swept_of_secrets`, which revalidates).

    A reader never sees a half-written file; a crash, a full disk or a read-only file system
    leaves the previous version in place.

    Raises:
        WriteError: the folder or the file cannot be written (one clear line).
    """
    data = record.model_dump(mode="json")
    clipped = clip_text(data)
    if any(secrets):
        record = swept_of_secrets(RunRecord, clipped, secrets)
    elif clipped != data:
        record = RunRecord.model_validate(clipped)
    # Through a symlink to its target, as a plain write would (not replacing the link).
    atomic_write_text(out.resolve(), record.model_dump_json(indent=2) + "\n")


def git_commit(start: Path) -> str | None:
    """The git commit of the checkout containing ``start`` (None outside one)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(start), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and len(sha) == 40 else None


def read_api_key(spec: Spec, file: str, environ: dict[str, str] | None = None) -> str | None:
    """The API key from the environment variable named by ``engine.api_key_env`` (or None).

    Raises:
        InputError: the spec names a variable that is not set.
    """
    name = spec.engine.api_key_env
    if not name:
        return None
    env = os.environ if environ is None else environ
    value = env.get(name)
    if not value:
        raise InputError(
            [Problem(file, "engine.api_key_env", f"environment variable {name} is not set")]
        )
    return value


def load_run_spec(
    path: Path,
    mode: Mode,
    endpoint: str | None,
    kv_dtype: str | None = None,
    workers: int | str | None = None,
) -> Spec:
    """:func:`load_spec_before_mode`, then the mode applied (:func:`apply_mode`).

    Raises:
        SpecError, InputError: as :func:`load_spec_before_mode`.
    """
    return apply_mode(load_spec_before_mode(path, endpoint, kv_dtype, workers), mode)


def load_spec_before_mode(
    path: Path,
    endpoint: str | None,
    kv_dtype: str | None = None,
    workers: int | str | None = None,
) -> Spec:
    """Load the spec, override ``engine.endpoint`` with ``endpoint``, ``model.kv_dtype``
    with ``kv_dtype`` (per configuration, outside the fingerprint) and
    ``measurement.workers`` with ``workers`` (outside the fingerprint); the mode is not
    applied yet (:func:`tokenwatt.collect.plan.modes.mode_overrides` compares before and after).

    Raises:
        SpecError: the spec cannot be read or is invalid.
        InputError: ``endpoint`` is not an http(s) URL (named ``--endpoint``),
            ``kv_dtype`` is not a KV-cache dtype (named ``--kv-dtype``), or ``workers`` is
            neither a whole number from 1 to 256 nor ``auto`` (named ``--workers``).
    """
    return adjust_run_spec(load_spec(path), endpoint, kv_dtype, workers)


def adjust_run_spec(
    spec: Spec,
    endpoint: str | None,
    kv_dtype: str | None = None,
    workers: int | str | None = None,
    ray_address: str | None = None,
) -> Spec:
    """:func:`load_spec_before_mode` for a spec already loaded (or built from flags), and
    ``ray_address`` over ``measurement.ray_address`` (``--ray-address``).

    Raises:
        InputError: as :func:`load_spec_before_mode`; an empty or overlong
            ``--ray-address``.
    """
    if endpoint is not None:
        check_endpoint_flag(endpoint)
        data = {**spec.engine.model_dump(), "endpoint": endpoint}
        engine = validate(EngineSpec, data, "--endpoint", InputError)
        spec = spec.model_copy(update={"engine": engine})
    if kv_dtype is not None:
        checked = validate(
            ModelSpec, {**spec.model.model_dump(), "kv_dtype": kv_dtype}, "--kv-dtype", InputError
        )
        # A copy, not the validated rebuild: the rebuild would mark every field as set, and
        # the record keeps which dtypes nobody stated (records.unstated_fields).
        model = spec.model.model_copy(update={"kv_dtype": checked.kv_dtype})
        spec = spec.model_copy(update={"model": model})
    if workers is not None:
        text = str(workers).strip()
        if text != "auto" and not (text.isdigit() and 1 <= int(text) <= MAX_WORKERS):
            message = (
                f"must be a whole number from 1 to {MAX_WORKERS} (the largest accepted), "
                f"or auto; got {text[:40]!r}"
            )
            raise InputError([Problem("--workers", "", message)])
        value = "auto" if text == "auto" else int(text)
        measurement = spec.measurement.model_copy(update={"workers": value})
        spec = spec.model_copy(update={"measurement": measurement})
    if ray_address is not None:
        data = {**spec.measurement.model_dump(), "ray_address": ray_address.strip() or None}
        if data["ray_address"] is None:
            raise InputError([Problem("--ray-address", "", "is empty")])
        measurement = validate(MeasurementSpec, data, "--ray-address", InputError)
        spec = spec.model_copy(update={"measurement": measurement})
    return spec


def suite_path(spec: Spec, spec_path: Path) -> Path | None:
    """The accuracy suite file: as written, or relative to the spec's folder."""
    if not spec.accuracy.suite:
        return None
    p = Path(spec.accuracy.suite)
    if not p.is_absolute() and not p.exists():
        p = spec_path.parent / p
    return p


def environment_from(info: EngineInfo, meter: Any, spec: Spec) -> Environment:
    """The record's environment: engine (from the probe), accelerators (from the meter)."""
    env = Environment(engine_flags=list(spec.engine.flags), hostname=socket.gethostname())
    env = info.apply_to(env)
    if meter is not None:
        ident = meter.identity()
        env = env.model_copy(
            update={
                "gpu_name": ident.accelerator,
                "gpu_count": ident.count,
                "driver": ident.driver,
                "rated_bw_tbs_per_gpu": ident.rated_bw_tbs_per_gpu,
            }
        )
    return env


RUN_RECORD_KEYS = frozenset({"schema_version", "tool", "label", "role", "spec", "fingerprint"})
"""Top-level keys every run record has: an existing ``--out`` with them may be replaced."""


def _is_run_record(path: Path) -> bool:
    """Whether ``path`` holds a run record (a JSON object with the run record's keys)."""
    import json

    try:
        with path.open("rb") as f:
            head = f.read(1)
            if head != b"{":
                return False
            data = json.loads(head + f.read())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.keys() >= RUN_RECORD_KEYS


def check_run_options(
    *,
    label: str,
    role: str,
    mode: str,
    out: Path,
    spec_path: Path,
    suite: Path | None = None,
    engine_log: Path | None = None,
) -> None:
    """Refuse bad collect options before anything is measured (all problems at once).

    ``--out`` must not be the spec, the accuracy suite, the engine log, a folder, or any
    other existing file that is not a run record; its folder must exist (or be creatable
    under an existing folder) and be writable. An existing *run record* is replaced by
    design: re-measuring a configuration into the same file updates it (git keeps the old
    one), and the run rewrites its own checkpoints there anyway.

    Raises:
        InputError: one Problem per bad option, named ``--label``, ``--role``, ``--mode``,
            ``--out``.
    """
    problems: list[Problem] = []
    if not label.strip():
        problems.append(Problem("--label", "label", "must not be empty or blank"))
    else:
        try:
            TypeAdapter(PlainName).validate_python(label)
        except ValidationError as exc:
            message = str(exc.errors()[0]["ctx"]["error"])
            problems.append(Problem("--label", "label", message))
        if len(label) > MAX_LABEL_CHARS:
            # A report record holds at most this many: refused now, not at `report`. Path
            # separators stay allowed: collect never makes a path of it (--out is the file),
            # and the default label is the served model's id (Qwen/Qwen3-8B).
            message = f"must have at most {MAX_LABEL_CHARS} characters, got {len(label)}"
            problems.append(Problem("--label", "label", message))
    if role not in ("baseline", "tuned"):
        problems.append(Problem("--role", "role", f"{role!r} is not one of baseline, tuned"))
    if mode not in ("smoke", "quick", "full"):
        problems.append(Problem("--mode", "mode", f"{mode!r} is not one of smoke, quick, full"))
    problems.extend(_out_problems(out, spec_path, suite, engine_log))
    if problems:
        raise InputError(problems)


def _out_problems(
    out: Path, spec_path: Path, suite: Path | None, engine_log: Path | None
) -> list[Problem]:
    where = str(out)
    for name, other in (("spec", spec_path), ("accuracy suite", suite), ("engine log", engine_log)):
        if same_file(out, other):
            return [Problem(where, "--out", f"is the {name}; the run record would replace it")]
    if out.is_dir():
        return [Problem(where, "--out", "is a folder; give a file name such as runs/X.json")]
    if out.exists() or out.is_symlink():
        if not out.is_file():
            return [Problem(where, "--out", "exists and is not a regular file")]
        if not _is_run_record(out):
            return [
                Problem(where, "--out", "exists and is not a run record; refusing to replace it")
            ]
    parent = out.parent
    while not parent.exists():
        if parent.parent == parent:
            break
        parent = parent.parent
    if not parent.is_dir():
        return [Problem(where, "--out", f"{parent} is not a folder")]
    try:  # os.access says yes to root on read-only mounts: try a real file
        fd, probe = tempfile.mkstemp(prefix=".tokenwatt-probe.", dir=parent)
        os.close(fd)
        Path(probe).unlink()
    except OSError as exc:
        return [Problem(where, "--out", f"folder {parent} is not writable ({exc.strerror})")]
    return []


def check_trace_file(spec: Spec, spec_path: Path) -> None:
    """A trace the spec names must be a plain file of a readable size whose every line is
    a valid entry, checked before the engine is even asked (it is read again later, once
    the context length is known; its size is bounded by :data:`MAX_TRACE_BYTES`).

    Raises:
        InputError: naming the spec file and ``workload.trace`` first, then, for a bad
            entry, the trace file and line (see :func:`load_trace`).
    """
    if spec.workload.trace == CHAT_MIX_V1:
        return
    trace = Path(spec.workload.trace)
    if not trace.is_absolute():
        trace = spec_path.parent / trace
    try:
        check_regular_file(trace, what="trace", max_bytes=MAX_TRACE_BYTES)
    except InputError as exc:
        problems = [Problem(str(spec_path), "workload.trace", p.message) for p in exc.problems]
        raise InputError(problems) from None
    try:
        load_trace(trace, vocab_size=spec.model.vocab_size, seed=spec.workload.seed)
    except InputError as exc:
        raise named_by(str(spec_path), "workload.trace", exc) from None
