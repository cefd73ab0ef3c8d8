"""The local half of a remote session: which files travel to the box, where they land, and
the wheel of this package that is installed there.

A session file's relative paths resolve against two folders: its ``spec`` against the
session file's folder, the spec's files (accuracy suite, trace, dataset, tokenizer file,
model config) against the spec's folder, and an engine command's file arguments (e.g.
``--accuracy-suite specs/sim-suite.jsonl``) against the folder the session is started in.
The box gets a mirror of the smallest local folder holding all of them and the current
folder, so every relative path resolves there as it does here. Absolute paths are left as
they are: they name files on the box (a model folder, say), which are not copied.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from tokenwatt.errors import InputError, Problem, TokenwattError
from tokenwatt.records import Session, load_session, load_spec, spec_path

MAX_UPLOAD_BYTES = 256 * 1024 * 1024
"""Largest single file copied to the box (bytes): suites, traces and datasets are far
smaller; a larger one is most likely model weights, which the box fetches itself."""


class RemoteError(TokenwattError):
    """Something on the way to or on the remote box failed: SSH refused the key, the host
    stayed unreachable, the package could not be installed, a remote command failed. The
    message names the host and what to do; it never holds key material."""


@dataclass(frozen=True)
class Upload:
    """What a remote session copies to the box.

    Attributes:
        root: the local folder mirrored on the box (holds the current folder and every
            file below).
        files: local files to copy (absolute), each below ``root``.
        session_file: the session file (absolute), below ``root``.
        cwd: the folder the session is started in (absolute), below ``root``.
        session: the validated session.
    """

    root: Path
    files: tuple[Path, ...]
    session_file: Path
    cwd: Path
    session: Session

    def remote(self, tree: str, local: Path) -> str:
        """Where the local path ``local`` (below ``root``) lands in the box's ``tree``."""
        rel = local.relative_to(self.root).as_posix()
        return str(PurePosixPath(tree) / rel) if rel != "." else tree

    def session_text(self, runs_dir: str) -> str:
        """The session file as copied: ``runs_dir`` set to the box's runs folder (an
        absolute path there), everything else as written."""
        data = yaml.safe_load(self.session_file.read_text(encoding="utf-8"))
        data["runs_dir"] = runs_dir
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def plan_upload(session_file: Path, cwd: Path | None = None) -> Upload:
    """Validate a session file and list the files a remote run of it needs.

    Call it before renting anything: a bad session file fails here, for free.

    Args:
        session_file: the local session YAML.
        cwd: the folder the session would be started in locally (default: the current one).

    Raises:
        InputError: the session or its spec is invalid, a file they name is missing or
            larger than :data:`MAX_UPLOAD_BYTES`, or the spec is given as an absolute path.
    """
    cwd = (cwd or Path.cwd()).resolve()
    session_file = session_file.resolve()
    session = load_session(session_file)
    if Path(session.spec).is_absolute():
        problem = "give the spec relative to the session file, so it can travel to the box"
        raise InputError([Problem(str(session_file), "spec", problem)])
    spec_file = spec_path(session, session_file)
    if not spec_file.is_file():
        raise InputError([Problem(str(session_file), "spec", f"no such file: {spec_file}")])
    spec = load_spec(spec_file)
    found = [session_file, spec_file.resolve()]
    named = [spec.accuracy.suite, spec.model.config, spec.model.tokenizer]
    if spec.workload.trace != "chat-mix-v1":
        named.append(spec.workload.trace)
    if spec.workload.dataset is not None:
        named.append(spec.workload.dataset.path)
    found += _relative_files(named, spec_file.parent)
    for config in session.configurations:
        command = config.command()
        if command is not None:
            found += _relative_files(_path_words(command), cwd)
    files = tuple(dict.fromkeys(found))
    for f in files:
        if f.stat().st_size > MAX_UPLOAD_BYTES:
            problem = f"{f} is larger than {MAX_UPLOAD_BYTES:,} bytes; put it on the box itself"
            raise InputError([Problem(str(session_file), "", problem)])
    root = Path(os.path.commonpath([cwd, *files]))
    return Upload(root=root, files=files, session_file=session_file, cwd=cwd, session=session)


def _relative_files(paths: Sequence[str | None], base: Path) -> list[Path]:
    """The existing local files among ``paths`` that are relative (to ``base``): a folder
    (a Hugging Face model folder) or an absolute path stays where the box has it."""
    out = []
    for p in paths:
        if p is None or Path(p).is_absolute():
            continue
        f = (base / p).resolve()
        if f.is_file():
            out.append(f)
    return out


def _path_words(command: str) -> list[str]:
    """The words of a command line that could be paths (``--opt=value`` gives ``value``)."""
    words = []
    for word in shlex.split(command):
        words.append(word.split("=", 1)[1] if word.startswith("-") and "=" in word else word)
    return words


def checkout_root() -> Path:
    """The source checkout this package runs from (the folder with ``pyproject.toml``).

    Raises:
        RemoteError: the package is installed, not run from a checkout: pass a wheel.
    """
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        raise RemoteError(
            f"tokenwatt runs from {root}, which is not a source checkout; "
            "build a wheel (python -m pip wheel --no-deps .) and pass it as the package"
        )
    return root


def build_wheel(out_dir: Path | None = None) -> Path:
    """Build a wheel of the local checkout (``python -m pip wheel --no-deps``), for a box that
    cannot reach our git but can reach PyPI for the dependencies.

    Args:
        out_dir: where the wheel goes (default: a new temporary folder).

    Raises:
        RemoteError: not a checkout, or pip failed (its last lines in the message).
    """
    root = checkout_root()
    out = out_dir or Path(tempfile.mkdtemp(prefix="tokenwatt-wheel-"))
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out)]
    done = subprocess.run(
        [*argv, str(root)], capture_output=True, text=True, timeout=600, check=False
    )
    wheels = sorted(out.glob("tokenwatt_bench-*.whl"))
    if done.returncode != 0 or not wheels:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-10:])
        raise RemoteError(f"cannot build a wheel of {root} (pip exited {done.returncode}):\n{tail}")
    return wheels[-1]


__all__ = [
    "MAX_UPLOAD_BYTES",
    "RemoteError",
    "Upload",
    "build_wheel",
    "checkout_root",
    "plan_upload",
]
