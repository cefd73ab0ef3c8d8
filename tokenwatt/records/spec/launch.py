"""An engine that ``tokenwatt collect`` starts and stops itself: the spec's
``engine.launch`` section and what the run record keeps of the process.

The launch section is part of the spec, and the spec is stored in every run record, so
nothing in it may be a secret: an argument that passes one (``--api-key VALUE``,
``token=…``, an ``sk-…`` key) or an ``env`` entry whose name says it is one is refused,
without repeating the value. Secrets reach the engine through the environment ``collect``
itself runs in, which the engine inherits and no record keeps.
"""

from __future__ import annotations

import re
import shlex
from typing import Literal

from pydantic import Field, model_validator

from tokenwatt.records.shared.base import (
    FieldValueError,
    NonEmptyStr,
    NonNegFloat,
    NonNegInt,
    PosFloat,
    StrictModel,
)
from tokenwatt.redact import scrub, secret_name

SECRET_OPTIONS = frozenset(
    {"--api-key", "--api_key", "--token", "--hf-token", "--password", "--passwd", "--secret"}
)
"""Options whose value is a secret (vLLM's and llama.cpp's ``--api-key``, ``--hf-token``)."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

PORT_PLACEHOLDER = "{port}"
"""Written in an engine's arguments, replaced by a free port on 127.0.0.1 that the
endpoint then uses too (``tokenwatt sim --port {port}``)."""


def check_argv(field: str, argv: list[str]) -> None:
    """Refuse an argument list that passes a secret; the value is never repeated.

    Raises:
        FieldValueError: naming ``field[i]`` (the option, when it holds no secret itself).
    """
    for i, arg in enumerate(argv):
        option = arg.split("=", 1)[0]
        passes = (arg in SECRET_OPTIONS and i + 1 < len(argv)) or (
            option in SECRET_OPTIONS and "=" in arg
        )
        if passes:
            raise FieldValueError(
                f"{field}[{i}]",
                f"{option} passes a secret on the command line, which the run record would "
                "keep; give it to the engine through the environment instead (vLLM reads "
                "VLLM_API_KEY, llama.cpp's server LLAMA_API_KEY; set it where you run "
                "tokenwatt, the engine inherits it); the value is not shown here",
            )
        if scrub(arg) != arg:
            raise FieldValueError(
                f"{field}[{i}]",
                "looks like it holds a secret (a key, a token, a password or a signed URL), "
                "which the run record would keep; pass it through the environment instead; "
                "the value is not shown here",
            )


class EngineLaunch(StrictModel):
    """How ``collect`` starts the engine itself (``engine.launch``; ``--engine-cmd``).

    Exactly one of ``argv`` and ``cmd``. The command is not run through a shell (write
    ``bash -c '…'`` for pipes or ``&&``); it runs in its own session, so that stopping it
    signals its whole process tree.
    """

    argv: list[NonEmptyStr] | None = Field(
        default=None, description="The engine's command line as a list of arguments."
    )
    cmd: NonEmptyStr | None = Field(
        default=None,
        description="The engine's command line as one string, split like a POSIX shell "
        "would (shlex), without running a shell.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables set for the engine on top of collect's own "
        "environment (which it inherits). Recorded, so no secrets: a name that says it holds "
        "one (KEY, TOKEN, SECRET, PASSWORD, ...) is refused; set those where you run tokenwatt.",
    )
    health_url: str | None = Field(
        default=None,
        description="URL that answers HTTP 200 once the engine serves; default: the "
        "endpoint's /v1/models.",
    )
    startup_timeout_s: PosFloat = Field(
        default=900.0,
        description="Seconds to wait for the engine to become healthy before giving up "
        "(it is then stopped). Large models load for minutes.",
    )
    stop_grace_s: NonNegFloat = Field(
        default=30.0,
        description="Seconds between SIGTERM to the engine's process group and SIGKILL.",
    )

    @model_validator(mode="after")
    def _one_command(self) -> EngineLaunch:
        if (self.argv is None) == (self.cmd is None):
            raise FieldValueError("argv", "give exactly one of argv (a list) and cmd (a string)")
        if self.cmd is not None:
            try:
                args = shlex.split(self.cmd)
            except ValueError as exc:
                raise FieldValueError("cmd", f"cannot be split into arguments: {exc}") from None
            if not args:
                raise FieldValueError("cmd", "is empty")
            check_argv("cmd", args)
        else:
            check_argv("argv", self.argv or [])
        for name, value in self.env.items():
            if not _ENV_NAME.fullmatch(name):
                raise FieldValueError(f"env.{name}", "is not an environment variable's name")
            if secret_name(name) or scrub(value) != value:
                raise FieldValueError(
                    f"env.{name}",
                    "looks like a secret, which the run record would keep; set it in the "
                    "environment you run tokenwatt in (the engine inherits it); the value "
                    "is not shown here",
                )
        return self

    def args(self) -> list[str]:
        """The command line as a list of arguments."""
        return list(self.argv) if self.argv is not None else shlex.split(self.cmd or "")


EngineStop = Literal["sigterm", "sigkill", "exited", "running"]
"""How a launched engine ended: stopped by SIGTERM within the grace period, killed with
SIGKILL after it, exited by itself before collect stopped it, or (in a checkpoint written
while it ran) still running."""


class EngineProcess(StrictModel):
    """The engine process ``collect`` started and stopped (``RunRecord.engine_process``)."""

    argv: list[str] = Field(
        description="The exact command line started (after {port} was filled in), scrubbed "
        "of credentials."
    )
    env_names: list[str] = Field(
        default_factory=list,
        description="Names of the variables set from engine.launch.env (their values are "
        "in the spec).",
    )
    health_url: str = Field(description="The URL polled until it answered HTTP 200.")
    log: str | None = Field(
        default=None,
        description="The engine's standard output and error, scrubbed of credentials, "
        "written beside the run record (path as collect wrote it): RUN.engine.log while the "
        "engine runs, RUN.engine.log.gz once it has stopped (gzip; its first 1 MiB and last "
        "3 MiB, with a line saying how much was left out between them).",
    )
    log_bytes: NonNegInt | None = Field(
        default=None,
        description="Bytes the engine wrote to its log (scrubbed), before the cap and "
        "compression; null while it runs and in records made before this field existed.",
    )
    log_left_out_bytes: NonNegInt | None = Field(
        default=None,
        description="Bytes of the log's middle left out of RUN.engine.log.gz (0: all of "
        "it is kept); null as log_bytes.",
    )
    ready_after_s: NonNegFloat | None = Field(
        default=None, description="Seconds from the start until the health URL answered."
    )
    stop: EngineStop = Field(default="running", description="How the engine ended.")
    exit_code: int | None = Field(
        default=None,
        description="The engine's exit status (negative: killed by that signal number).",
    )


__all__ = [
    "PORT_PLACEHOLDER",
    "SECRET_OPTIONS",
    "EngineLaunch",
    "EngineProcess",
    "EngineStop",
    "check_argv",
    "secret_name",
]
