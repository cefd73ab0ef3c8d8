"""``ipmi`` power: ``ipmitool dcmi power reading`` (the BMC's DCMI instantaneous reading).

Local BMC by default; with ``power.host`` the command talks to a remote BMC over LAN
(``-I lanplus -H host -U username -E``); ``-E`` makes ipmitool read the password from the
``IPMI_PASSWORD`` environment variable, filled from the variable ``power.password_env``
names, so the password never appears on a command line. Figures are ``node`` scope.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tokenwatt.errors import TelemetryError
from tokenwatt.records import PowerMethod, PowerSample, PowerScope, PowerSpec
from tokenwatt.telemetry.base import HardwareIdentity, ReadError
from tokenwatt.telemetry.command import run_for_output

_INSTANT = re.compile(r"Instantaneous power reading:\s*([0-9]+(?:\.[0-9]+)?)\s*Watts", re.I)
_STATE = re.compile(r"Power reading state is:\s*(\w+)", re.I)


def parse_dcmi_power_reading(text: str) -> float:
    """The instantaneous reading (W) from ``ipmitool dcmi power reading`` output.

    Raises:
        ValueError: no reading in the text, or the BMC says power reading is deactivated.
    """
    state = _STATE.search(text)
    if state and state.group(1).lower() != "activated":
        raise ValueError(f"the BMC's power reading state is {state.group(1)!r}")
    match = _INSTANT.search(text)
    if not match:
        first = text.strip().splitlines()[0] if text.strip() else "(no output)"
        raise ValueError(f"no 'Instantaneous power reading' in ipmitool output: {first}")
    return float(match.group(1))


class IpmiSource:
    """Node power from ``ipmitool dcmi power reading``.

    Args:
        power: the spec's ``power`` section (``host``, ``username``, ``password_env``).
        environ: the environment, for the password variable and ``PATH``.
        executable: the ipmitool program (tests point this at a fixture script).
        timeout_s: time limit per call (s).

    Raises:
        TelemetryError: ipmitool missing, failing, or the password variable unset.
    """

    name = "ipmi"
    scope: PowerScope = "node"
    power_method: PowerMethod = "reading"
    devices = 1

    def __init__(
        self,
        power: PowerSpec,
        *,
        environ: Mapping[str, str],
        executable: str = "ipmitool",
        timeout_s: float = 10.0,
    ) -> None:
        self.notes: list[str] = []
        self._timeout_s = timeout_s
        self._env = dict(environ)
        args = [executable]
        if power.host:
            args += ["-I", "lanplus", "-H", power.host]
            if power.username:
                args += ["-U", power.username]
            if power.password_env:
                if power.password_env not in environ:
                    raise TelemetryError(
                        f"power.password_env names {power.password_env}, but that environment "
                        "variable is not set"
                    )
                self._env["IPMI_PASSWORD"] = environ[power.password_env]
                args.append("-E")
        self._args = [*args, "dcmi", "power", "reading"]
        try:
            self.read()
        except ReadError as exc:
            raise TelemetryError(f"ipmitool dcmi power reading: {exc}") from exc

    def read(self) -> PowerSample:
        """Run ipmitool once.

        Raises:
            ReadError: not found, non-zero exit, timeout, or unparsable output.
        """
        stdout = run_for_output(
            self._args, self._timeout_s, env=self._env, not_found_hint=" (install ipmitool)"
        )
        try:
            return PowerSample(power_w=parse_dcmi_power_reading(stdout))
        except ValueError as exc:
            raise ReadError(str(exc)) from exc

    def identity(self) -> HardwareIdentity:
        """The BMC does not name the accelerators."""
        return HardwareIdentity(vendor="unknown", accelerator="unknown (IPMI node power)", count=0)

    def close(self) -> None:
        """Nothing to release."""
