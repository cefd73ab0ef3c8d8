"""``command`` power: any command that prints a power reading (W).

``power.command`` is split like a shell would (``shlex``) but run without a shell. What it
prints is picked by ``power.field``:

- unset: the whole output must be one number (W);
- ``re:<regex>``: the first match's group ``watts`` if the pattern names one, else group 1,
  e.g. ``re:Power Draw\\s*:\\s*([0-9.]+)``;
- anything else: a dotted key path into JSON output; integer parts index lists, e.g.
  ``readings.0.watts`` for ``{"readings": [{"watts": 412.5}]}``.

Figures are ``node`` scope (the command is assumed to meter the whole node; use ``board``
or ``prometheus`` for GPU board power).
"""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from tokenwatt.errors import TelemetryError
from tokenwatt.records import PowerMethod, PowerSample, PowerScope, PowerSpec
from tokenwatt.redact import scrub_capped
from tokenwatt.telemetry.base import MAX_READING_W, HardwareIdentity, ReadError


def pick_reading(output: str, field: str | None) -> float:
    """The reading (W) that ``field`` selects from a command's output (see module docs).

    Raises:
        ValueError: nothing matched, the key path is missing, the JSON is nested too deep,
            or the value is not a finite number in ``[-MAX_READING_W, MAX_READING_W]``
            (negative readings pass here: the window's plausibility rules name them).
    """
    value = _pick(output.strip(), field)
    if not math.isfinite(value) or abs(value) > MAX_READING_W:
        raise ValueError(f"{value!r} is not a power reading (finite, at most {MAX_READING_W:g} W)")
    return value


def _pick(text: str, field: str | None) -> float:
    if not field:
        return float(text)
    if field.startswith("re:"):
        pattern = re.compile(field[3:])
        match = pattern.search(text)
        if not match:
            raise ValueError(f"pattern {field[3:]!r} did not match the output")
        group = "watts" if "watts" in pattern.groupindex else 1
        return float(match.group(group))
    try:
        node: Any = json.loads(text)
    except RecursionError:
        raise ValueError("the JSON output is nested too deep") from None
    for part in field.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise ValueError(f"key path {field!r} not found at {part!r}")
    if isinstance(node, bool) or not isinstance(node, int | float | str):
        raise ValueError(f"{field!r} is not a number: {node!r}")
    return float(node)


def run_for_output(
    args: Sequence[str],
    timeout_s: float,
    *,
    env: Mapping[str, str] | None = None,
    not_found_hint: str = "",
) -> str:
    """Run a reading command once (no shell) and return its standard output.

    Args:
        args: the command and its arguments.
        timeout_s: time limit (s).
        env: the environment; None = inherit this process's.
        not_found_hint: appended to the "not found" message, e.g. `` (install ipmitool)``.

    Raises:
        ReadError: not found, timeout, or a non-zero exit (with the first 200 characters
            of its standard error).
    """
    try:
        done = subprocess.run(
            list(args), capture_output=True, timeout=timeout_s, env=env, check=False
        )
    except FileNotFoundError as exc:
        raise ReadError(f"{args[0]} not found{not_found_hint}") from exc
    except subprocess.TimeoutExpired as exc:
        raise ReadError(f"timed out after {timeout_s} s") from exc
    except OSError as exc:  # not executable, a folder, …
        raise ReadError(f"{args[0]} could not be run: {exc.strerror or exc}") from exc
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", errors="replace").strip()[:200]
        raise ReadError(f"exit status {done.returncode}: {err}")
    try:
        return str(done.stdout.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ReadError(f"the output is not UTF-8 text (byte {exc.start})") from None


class CommandSource:
    """Power from a user command, run once per sample.

    Args:
        power: the spec's ``power`` section (``command``, ``field``).
        timeout_s: time limit per run (s).

    Raises:
        TelemetryError: no command, or its first run fails.
    """

    name = "command"
    scope: PowerScope = "node"
    power_method: PowerMethod = "reading"
    devices = 1

    def __init__(self, power: PowerSpec, *, timeout_s: float = 5.0) -> None:
        if not power.command:
            raise TelemetryError("power.source 'command' needs power.command")
        self._args = shlex.split(power.command)
        self._field = power.field
        self._timeout_s = timeout_s
        self.notes: list[str] = []
        try:
            self.read()
        except ReadError as exc:
            raise TelemetryError(f"power.command {power.command!r}: {exc}") from exc

    def read(self) -> PowerSample:
        """Run the command once and pick the reading.

        Raises:
            ReadError: not found, non-zero exit, timeout, or no reading in the output.
        """
        stdout = run_for_output(self._args, self._timeout_s)
        try:
            return PowerSample(power_w=pick_reading(stdout, self._field))
        except ValueError as exc:
            # The message of float("<whole output>") holds the whole output: capped.
            shown = scrub_capped(stdout.strip(), 120)
            raise ReadError(f"{scrub_capped(str(exc), 200)} (output: {shown!r})") from exc

    def identity(self) -> HardwareIdentity:
        """A command does not name the accelerators."""
        return HardwareIdentity(vendor="unknown", accelerator="unknown (command power)", count=0)

    def close(self) -> None:
        """Nothing to release."""
