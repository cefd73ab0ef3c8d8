"""A session file (``tokenwatt session FILE.yaml``): several configurations measured one
after another with one spec, each with the engine ``collect`` starts for it, then a report.

The file is validated whole before anything runs; its paths (``spec``) are relative to the
session file's folder, ``runs_dir`` to the current folder (like ``collect --out``).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from tokenwatt.errors import InputError, Problem
from tokenwatt.records.reading.load import read_yaml
from tokenwatt.records.reading.problems import problems_from
from tokenwatt.records.shared.base import (
    FieldValueError,
    FileLabel,
    NonEmptyStr,
    PlainName,
    PosInt,
    StrictModel,
)
from tokenwatt.records.spec.launch import check_argv
from tokenwatt.records.spec.spec import KvDtype

SessionMode = Literal["smoke", "quick", "full"]


class SessionConfig(StrictModel):
    """One configuration of a session: what ``collect`` is run with."""

    label: FileLabel = Field(
        description="The configuration's name; its run record is RUNS_DIR/LABEL.json, so "
        "a plain file name: at most 120 characters, no '/' or '\\', no leading '.'."
    )
    role: Literal["baseline", "tuned"] = Field(description="Its role in the report.")
    engine_cmd: NonEmptyStr | None = Field(
        default=None,
        description="The engine's command line (collect --engine-cmd; {port}: a free port). "
        "None: the spec's engine.launch, or an engine already running at the endpoint.",
    )
    engine_args: list[NonEmptyStr] = Field(
        default_factory=list,
        description="Arguments added to the end of engine_cmd (e.g. --kv-cache-dtype fp8).",
    )
    kv_dtype: KvDtype | None = Field(
        default=None, description="collect --kv-dtype: this configuration's KV-cache dtype."
    )
    endpoint: NonEmptyStr | None = Field(default=None, description="collect --endpoint.")
    workers: PosInt | Literal["auto"] | None = Field(default=None, description="collect --workers.")
    fast_search: bool = Field(default=False, description="collect --fast-search.")
    accuracy: bool = Field(default=True, description="False: collect --no-accuracy.")

    @model_validator(mode="after")
    def _engine(self) -> SessionConfig:
        if self.engine_args and self.engine_cmd is None:
            raise FieldValueError("engine_args", "needs engine_cmd (the command they extend)")
        if self.engine_cmd is not None:
            try:
                args = shlex.split(self.engine_cmd)
            except ValueError as exc:
                raise FieldValueError("engine_cmd", f"cannot be split: {exc}") from None
            check_argv("engine_cmd", args)
        check_argv("engine_args", list(self.engine_args))
        return self

    def command(self) -> str | None:
        """``engine_cmd`` with ``engine_args`` appended (None without an engine command)."""
        if self.engine_cmd is None:
            return None
        return " ".join([self.engine_cmd, *map(shlex.quote, self.engine_args)])


class SessionReport(StrictModel):
    """The report made from the session's runs (``tokenwatt report``)."""

    id: NonEmptyStr | None = Field(default=None, description="Report id (default: from title).")
    cards: PosInt = Field(default=64, description="fleet.cards.")
    demo: bool = Field(
        default=False, description="Allow smoke-mode and simulated runs (a demo report)."
    )
    replace: bool = Field(
        default=False, description="Replace the report file if it exists (report --force)."
    )


class Session(StrictModel):
    """A session file: one spec, several configurations, one report."""

    title: PlainName = Field(description="The report's title.")
    spec: NonEmptyStr = Field(description="The spec every configuration is measured with.")
    mode: SessionMode = Field(default="quick", description="collect --mode for every run.")
    smoke_first: bool = Field(
        default=False,
        description="Run every configuration in smoke mode first (records in "
        "RUNS_DIR/smoke/); a configuration whose smoke run fails is not measured.",
    )
    runs_dir: NonEmptyStr = Field(default="runs", description="Folder for the run records.")
    report: SessionReport = Field(
        default_factory=SessionReport,
        description="The report written at the end (id, cards, demo, replace).",
    )
    configurations: list[SessionConfig] = Field(
        min_length=1,
        description="The configurations, measured one after another in this order; exactly "
        "one has role baseline.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Session:
        seen: set[str] = set()
        for i, config in enumerate(self.configurations):
            if config.label in seen:
                raise FieldValueError(
                    f"configurations[{i}].label", f"{config.label!r} is used twice"
                )
            seen.add(config.label)
        baselines = [c for c in self.configurations if c.role == "baseline"]
        if len(baselines) != 1:
            raise FieldValueError(
                "configurations",
                f"exactly one configuration must have role baseline, found {len(baselines)}",
            )
        if self.mode == "smoke" and not self.report.demo:
            raise FieldValueError(
                "report.demo", "must be true when mode is smoke (smoke runs are never reported)"
            )
        return self


def load_session(path: Path) -> Session:
    """Read and validate a session file.

    Raises:
        InputError: unreadable, not YAML, or not a valid session (one problem per field).
    """
    data = read_yaml(
        path,
        InputError,
        "a session file must be a mapping (title, spec, ...)",
        kind="a session file",
    )
    try:
        return Session.model_validate(data, strict=True)
    except ValidationError as exc:
        raise InputError(problems_from(str(path), exc)) from exc


def spec_path(session: Session, session_path: Path) -> Path:
    """The session's spec, relative to the session file's folder."""
    p = Path(session.spec)
    return p if p.is_absolute() else session_path.parent / p


def check_paths(session: Session, session_path: Path) -> None:
    """The spec exists and is not the session file itself (it is validated by the first
    ``collect``).

    Raises:
        InputError: naming the session file and ``spec``.
    """
    spec = spec_path(session, session_path)
    if not spec.is_file():
        raise InputError([Problem(str(session_path), "spec", f"no such file: {spec}")])
    if spec.resolve() == session_path.resolve():
        raise InputError(
            [
                Problem(
                    str(session_path),
                    "spec",
                    f"names this session file itself ({session.spec}); give the benchmark "
                    "spec (a *.spec.yaml file) the configurations are measured with",
                )
            ]
        )


__all__ = [
    "Session",
    "SessionConfig",
    "SessionMode",
    "SessionReport",
    "check_paths",
    "load_session",
    "spec_path",
]
