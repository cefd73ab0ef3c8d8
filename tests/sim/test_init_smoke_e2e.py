"""The README's "try every step without a GPU" path: ``tokenwatt init`` against
``tokenwatt sim`` (its defaults), then ``collect --mode smoke`` with the written spec, then
``show``. Real subprocesses throughout.

On a machine where no GPU library opens (no NVML), the spec ``init`` writes measures no
power (``hardware.adapter: none``, ``power.source: none``) and ``init`` says why; ``collect``
then says once, at the end, that no power source was configured, never NVML's error, and
``show`` prints the record's "not covered" list and the sentence on why the result rate is
where it is.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.sim.sim_process import REPO, start_sim
from tokenwatt.analysis import explain_run
from tokenwatt.records import RunRecord

NO_POWER = "warning: Power: no power source configured (power.source: none)"


def tokenwatt(*args: str, cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "tokenwatt", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def nvml_opens() -> bool:
    """Whether NVML initialises here (then board power is read, and nothing is missing)."""
    try:
        import pynvml  # type: ignore[import-untyped,unused-ignore]

        pynvml.nvmlInit()
    except Exception:  # any failure: no NVML on this machine
        return False
    pynvml.nvmlShutdown()
    return True


def test_init_then_a_smoke_run_finds_a_rate_and_says_power_is_missing(tmp_path: Path) -> None:
    sim = start_sim()
    try:
        spec = tmp_path / "specs" / "sim.spec.yaml"
        init = tokenwatt(
            "init", "--endpoint", sim.endpoint, "--out", str(spec), cwd=tmp_path, timeout_s=60
        )
        assert init.returncode == 0, init.stderr
        out = tmp_path / "runs" / "smoke.json"
        # Shorter windows than smoke's own (5 s warm-up, 10 s probes) to keep the test short;
        # the sizes init chose are the README's.
        run = tokenwatt(
            *("collect", "--spec", str(spec), "--mode", "smoke", "--label", "smoke"),
            *("--role", "baseline", "--out", str(out), "--no-progress"),
            *("--warmup", "1", "--duration", "3"),
            cwd=tmp_path,
            timeout_s=400,
        )
    finally:
        sim.stop()
    assert run.returncode == 0, run.stdout + run.stderr
    written = yaml.safe_load(spec.read_text(encoding="utf-8"))
    # The simulator's KV cache holds 1,280 tokens: lengths fitted to its context (1,280)
    # let about five requests run at once. Sixteen at the p90s must fit: p90s 52 + 26.
    assert written["workload"]["input_tokens"] == {"median": 26, "p90": 52}
    assert written["workload"]["output_tokens"] == {"median": 13, "p90": 26}
    record = RunRecord.model_validate_json(out.read_text(encoding="utf-8"))
    assert record.result is not None and record.result.rate_rps > 2.0, run.stdout
    if nvml_opens():
        assert written["power"]["source"] == "board"
        return
    assert (written["hardware"]["adapter"], written["power"]["source"]) == ("none", "none")
    assert "note: power not measured (hardware.adapter none, power.source none)" in init.stderr
    assert "NVIDIA: NVML did not initialise" in init.stderr
    assert "# Power: NVIDIA: NVML did not initialise" in spec.read_text(encoding="utf-8")
    # Said once, at the end; the run never tried NVML.
    assert run.stderr.count(NO_POWER) == 1, run.stderr
    assert "NVML" not in run.stderr, run.stderr
    note = "Power: no power source configured (power.source: none)"
    assert note in record.not_covered
    shown = tokenwatt("show", str(out), cwd=tmp_path, timeout_s=60)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "not covered:" in lines and f"  - {note}" in lines
    assert explain_run(record) in lines, shown.stdout
