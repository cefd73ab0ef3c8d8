"""Files and values the user gives: size caps (one policy for every YAML and JSON input),
lone surrogates, control characters in spec names, a session whose spec is itself, and a
run's value that a report refuses named by its run file (``tokenwatt`` as a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.runs_factory import make_run, tuned_run
from tokenwatt.errors import InputError, RecordError, SpecError
from tokenwatt.records.reading.load import MAX_JSON_BYTES, MAX_YAML_BYTES, load_spec, read_json
from tokenwatt.records.reading.session import load_session

REPO = Path(__file__).resolve().parents[2]
SPEC = (REPO / "specs" / "sim-demo.spec.yaml").read_text(encoding="utf-8")
SESSION = (REPO / "specs" / "sim-session.yaml").read_text(encoding="utf-8")


def tokenwatt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "tokenwatt", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_twelve_megabyte_session_file_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(SESSION + "".join(f"# {'x' * 98}\n" for _ in range(120_000)))
    assert path.stat().st_size > 12_000_000
    started = time.monotonic()
    with pytest.raises(InputError) as caught:
        load_session(path)
    assert time.monotonic() - started < 2  # refused before parsing, not after minutes
    (problem,) = caught.value.problems
    assert (problem.file, problem.field) == (str(path), "")
    assert problem.message == (
        f"the file is {path.stat().st_size:,} bytes, more than the {MAX_YAML_BYTES:,} "
        "accepted for this kind of file"
    )


def test_json_inputs_are_capped_too(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    with path.open("wb") as f:
        f.truncate(MAX_JSON_BYTES + 1)  # sparse: nothing is written
    with pytest.raises(RecordError) as caught:
        read_json(path)
    assert "more than the 67,108,864 accepted" in caught.value.problems[0].message


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    with pytest.raises(SpecError) as caught:
        load_spec(fifo)
    assert caught.value.problems[0].message == "the file is not a plain file; give a file"


def test_a_lone_surrogate_in_a_spec_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "s.spec.yaml"
    path.write_text(SPEC.replace("model:\n", 'model:\n  quantization: "fp8 \\ud800"\n', 1))
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    (problem,) = caught.value.problems
    assert problem.field == "model.quantization"
    assert "lone surrogate" in problem.message


@pytest.mark.parametrize(
    ("field", "line"),
    [
        ("engine.model", "  model: "),
        ("model.name", "  name: "),
    ],
)
def test_spec_names_refuse_control_characters(tmp_path: Path, field: str, line: str) -> None:
    section = field.split(".")[0] + ":\n"
    at = SPEC.index(section)
    start = SPEC.index(line, at)
    end = SPEC.index("\n", start)
    path = tmp_path / "s.spec.yaml"
    path.write_text(SPEC[:start] + line + '"m\\e[2Jx"' + SPEC[end:])
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    (problem,) = caught.value.problems
    assert problem.field == field
    assert "control character U+001B at position 2" in problem.message


def test_a_session_whose_spec_is_itself_gets_one_line(tmp_path: Path) -> None:
    path = tmp_path / "session.yaml"
    path.write_text(SESSION.replace("spec: sim-demo.spec.yaml", "spec: session.yaml"))
    done = tokenwatt("session", str(path), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        f"error: {path}: spec: names this session file itself (session.yaml); give the "
        "benchmark spec (a *.spec.yaml file) the configurations are measured with\n"
    )


def test_a_report_names_the_run_file_of_an_over_long_label(tmp_path: Path) -> None:
    label = "x" * 130  # a run record takes it; a report configuration keeps 120 at most
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "a.json").write_text(make_run(label=label).model_dump_json(), "utf-8")
    (runs / "b.json").write_text(tuned_run().model_dump_json(), "utf-8")
    done = tokenwatt(
        "report", "runs/a.json", "runs/b.json", "--title", "T", "--out", "r.json", cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: runs/a.json: label: ")
    assert "(as a report configuration's label)" in done.stderr
    assert "<command line>" not in done.stderr
    assert not (tmp_path / "r.json").exists()
