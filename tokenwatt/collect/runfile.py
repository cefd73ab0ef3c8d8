"""Files and inputs of a collect run: the spec with its mode, the API key, the record file.

The run record is written atomically (temporary file in the same folder, then
``os.replace``): a reader never sees half a record, and a crash leaves the previous
checkpoint in place.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tokenwatt.collect.modes import Mode, apply_mode
from tokenwatt.collect.probes import EngineInfo
from tokenwatt.errors import InputError, Problem
from tokenwatt.records.load import load_spec, validate
from tokenwatt.records.run import Environment, RunRecord
from tokenwatt.records.spec import EngineSpec, ModelSpec, Spec


def write_record(record: RunRecord, out: Path) -> None:
    """Write ``record`` to ``out`` atomically: temp file in the same folder, then rename.

    A reader never sees a half-written file; a crash leaves the previous version in place.

    Raises:
        OSError: the folder cannot be created or written.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    text = record.model_dump_json(indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        Path(tmp).replace(out)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise


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
    path: Path, mode: Mode, endpoint: str | None, kv_dtype: str | None = None
) -> Spec:
    """Load the spec, override ``engine.endpoint`` with ``endpoint`` and ``model.kv_dtype``
    with ``kv_dtype`` (per configuration, outside the fingerprint), apply the mode.

    Raises:
        SpecError: the spec cannot be read or is invalid.
        InputError: ``endpoint`` is not an http(s) URL (named ``--endpoint``), or
            ``kv_dtype`` is not a KV-cache dtype (named ``--kv-dtype``).
    """
    spec = load_spec(path)
    if endpoint is not None:
        data = {**spec.engine.model_dump(), "endpoint": endpoint}
        engine = validate(EngineSpec, data, "--endpoint", InputError)
        spec = spec.model_copy(update={"engine": engine})
    if kv_dtype is not None:
        model = validate(
            ModelSpec, {**spec.model.model_dump(), "kv_dtype": kv_dtype}, "--kv-dtype", InputError
        )
        spec = spec.model_copy(update={"model": model})
    return apply_mode(spec, mode)


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
