"""The prepared GPU check exits cleanly, with a clear message, where there is no GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tokenwatt.errors import TelemetryError
from tokenwatt.telemetry.board_nvidia import NvmlSource

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_nvml_check.py"


def _has_gpu() -> bool:
    try:
        NvmlSource(environ={}).close()
    except TelemetryError:
        return False
    return True


@pytest.mark.skipif(_has_gpu(), reason="an NVIDIA GPU is here: the check would run")
def test_without_a_gpu_the_check_says_so_and_exits_2() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "no NVIDIA GPU to check on this machine" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
