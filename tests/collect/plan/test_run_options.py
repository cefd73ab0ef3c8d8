"""Bad collect options are refused before anything is measured: exit 2, nothing written.

Every case points ``--endpoint`` at a closed port: had the check come after the engine
probe, the exit would be 1 ("cannot reach the engine"), not 2.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tokenwatt.cli import cli
from tokenwatt.collect.plan.runfile import check_run_options
from tokenwatt.errors import InputError

REPO = Path(__file__).resolve().parents[3]
CLOSED = "http://127.0.0.1:9"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(REPO / "specs" / "sim-demo.spec.yaml", tmp_path)
    shutil.copy(REPO / "specs" / "sim-suite.jsonl", tmp_path)
    (tmp_path / "engine.log").write_text("INFO started\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _collect(*args: str) -> tuple[int, str]:
    base = ["collect", "--spec", "sim-demo.spec.yaml", "--role", "baseline"]
    result = CliRunner().invoke(cli, [*base, "--endpoint", CLOSED, "--no-progress", *args])
    return result.exit_code, result.output


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("sim-demo.spec.yaml", "is the spec"),
        ("sim-suite.jsonl", "is the accuracy suite"),
        ("engine.log", "is the engine log"),
        ("notes.json", "is not a run record"),
        ("engine.log/x.json", "is not a folder"),
    ],
)
def test_out_that_is_an_input_or_a_foreign_file_is_refused(
    here: Path, out: str, message: str
) -> None:
    (here / "notes.json").write_text('{"mine": true}\n')
    before = _snapshot(here)
    code, output = _collect("--label", "x", "--out", out, "--engine-log", "engine.log")
    assert code == 2, output
    assert f"{out}: --out: " in output and message in output
    assert "cannot reach the engine" not in output
    assert _snapshot(here) == before


def test_out_in_an_unwritable_folder_is_refused_before_measuring(here: Path) -> None:
    code, output = _collect("--label", "x", "--out", "/proc/tokenwatt/run.json")
    assert code == 2, output
    assert "/proc/tokenwatt/run.json: --out: folder /proc is not writable" in output


@pytest.mark.parametrize("label", ["", "   "])
def test_empty_label_is_a_clear_error(here: Path, label: str) -> None:
    code, output = _collect("--label", label, "--out", "run.json")
    assert code == 2, output
    assert "--label: label: must not be empty or blank" in output
    assert "Traceback" not in output and "validation error" not in output
    assert not (here / "run.json").exists()


@pytest.mark.parametrize(
    ("label", "code_point", "position"),
    [
        ("a\x1b]0;pwned\x07", "U+001B", 2),
        ("tuned\u202egnp.exe", "U+202E", 6),
        ("x\x00", "U+0000", 2),
    ],
)
def test_a_label_with_control_characters_is_refused(
    here: Path, label: str, code_point: str, position: int
) -> None:
    """A label reaches terminals and pages: an escape sequence or a right-to-left override in
    it could rewrite the terminal or reverse the text after it."""
    code, output = _collect("--label", label, "--out", "run.json")
    assert code == 2, output
    assert (
        f"--label: label: must be plain printable text: it holds the control character "
        f"{code_point} at position {position}"
    ) in output
    assert "\x1b" not in output and not (here / "run.json").exists()


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        ("", "at least 1 character"),
        ("ftp://x", "must start with http:// or https://"),
        ("http://127.0.0.1:99999/v1", "has port '99999': a port is a number from 1 to 65535"),
        ("http://127.0.0.1:0/v1", "has port '0': a port is a number from 1 to 65535"),
    ],
)
def test_bad_endpoint_is_a_clear_error(here: Path, endpoint: str, message: str) -> None:
    args = ["collect", "--spec", "sim-demo.spec.yaml", "--role", "baseline", "--label", "x"]
    result = CliRunner().invoke(cli, [*args, "--out", "run.json", "--endpoint", endpoint])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: --endpoint: ") and message in result.output
    assert not (here / "run.json").exists()


def test_bad_role_and_mode_from_the_library_are_named(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        check_run_options(
            label="x",
            role="tunde",
            mode="slow",
            out=tmp_path / "run.json",
            spec_path=tmp_path / "s.yaml",
        )
    fields = [(p.file, p.field) for p in info.value.problems]
    assert fields == [("--role", "role"), ("--mode", "mode")]


def test_an_existing_run_record_may_be_replaced(tmp_path: Path) -> None:
    keys = ("schema_version", "tool", "label", "role", "spec", "fingerprint")
    old = tmp_path / "run.json"
    old.write_text(json.dumps({k: 1 for k in keys}))
    check_run_options(
        label="x", role="baseline", mode="quick", out=old, spec_path=tmp_path / "s.yaml"
    )
    old.write_text(json.dumps({k: 1 for k in keys[:-1]}))
    with pytest.raises(InputError, match="not a run record"):
        check_run_options(
            label="x", role="baseline", mode="quick", out=old, spec_path=tmp_path / "s.yaml"
        )


def test_a_spec_or_engine_log_that_is_a_folder_is_one_clear_line(here: Path) -> None:
    (here / "folder").mkdir()
    code, output = _collect("--label", "x", "--out", "run.json", "--spec", "folder")
    assert code == 2, output
    assert "error: folder: the file is a folder; give a file" in output
    code, output = _collect("--label", "x", "--out", "run.json", "--engine-log", "folder")
    assert code == 2, output
    assert "error: folder: the engine log is a folder; give a file" in output
    assert "Usage:" not in output and not (here / "run.json").exists()


def test_a_trace_that_is_no_plain_file_is_refused_before_the_engine_is_asked(
    here: Path,
) -> None:
    """/dev/zero as a trace would fill the memory when read; the endpoint here is closed, so
    the refusal proves the check comes first."""
    import yaml

    data = yaml.safe_load((here / "sim-demo.spec.yaml").read_text())
    data["workload"]["trace"] = "/dev/zero"
    (here / "zero.spec.yaml").write_text(yaml.safe_dump(data))
    code, output = _collect("--label", "x", "--out", "run.json", "--spec", "zero.spec.yaml")
    assert code == 2, output
    assert "error: zero.spec.yaml: workload.trace: the trace is not a plain file" in output
    assert not (here / "run.json").exists()


def _spec_with(here: Path, name: str, change: dict[str, dict[str, object]]) -> str:
    import yaml

    data = yaml.safe_load((here / "sim-demo.spec.yaml").read_text())
    for section, values in change.items():
        data.setdefault(section, {}).update(values)
    (here / name).write_text(yaml.safe_dump(data))
    return name


def test_a_bad_accuracy_suite_is_refused_before_the_engine_is_asked(here: Path) -> None:
    """Every bad line is named, exit 2, nothing written; the closed endpoint proves the
    suite is read before the probe (it was read after the last window)."""
    (here / "bad-suite.jsonl").write_text(
        '{"id": "a", "prompt": "1+1=", "gold": "2"}\n{"id": NaN}\nnot json\n'
    )
    spec = _spec_with(here, "suite.spec.yaml", {"accuracy": {"suite": "bad-suite.jsonl"}})
    before = _snapshot(here)
    code, output = _collect("--label", "x", "--out", "run.json", "--spec", spec)
    assert code == 2, output
    named = "suite.spec.yaml: accuracy.suite: bad-suite.jsonl"
    assert f"{named}, line 2.id: missing, empty or not a string" in output
    assert f"{named}, line 3: not JSON" in output
    assert "cannot reach the engine" not in output
    assert _snapshot(here) == before


def test_a_bad_trace_line_is_refused_before_the_engine_is_asked(here: Path) -> None:
    (here / "t.jsonl").write_text('{"input_tokens": 8, "output_tokens": 4}\n{"prompt": 5}\n')
    spec = _spec_with(here, "trace.spec.yaml", {"workload": {"trace": "t.jsonl"}})
    before = _snapshot(here)
    code, output = _collect("--label", "x", "--out", "run.json", "--spec", spec)
    assert code == 2, output
    assert "t.jsonl" in output and "line 2" in output
    assert "cannot reach the engine" not in output
    assert _snapshot(here) == before


def test_a_missing_tokenizer_is_refused_before_the_engine_is_asked(here: Path) -> None:
    spec = _spec_with(here, "tok.spec.yaml", {"model": {"tokenizer": "no-such-tokenizer.json"}})
    before = _snapshot(here)
    code, output = _collect("--label", "x", "--out", "run.json", "--spec", spec)
    assert code == 2, output
    assert "model.tokenizer" in output
    assert "cannot reach the engine" not in output
    assert _snapshot(here) == before


def test_the_port_placeholder_of_a_launched_engine_is_a_valid_endpoint() -> None:
    """``{port}`` stands for the free port a launched engine gets: the port check must not
    refuse it (it did, and every ``--engine-cmd ... --endpoint ...:{port}/v1`` run failed)."""
    from tokenwatt.records.spec.spec import EngineSpec

    engine = EngineSpec(endpoint="http://127.0.0.1:{port}/v1", name="x", model="m")
    assert engine.endpoint.endswith(":{port}/v1")
    with pytest.raises(ValueError, match="a port is a number from 1 to 65535"):
        EngineSpec(endpoint="http://127.0.0.1:{prt}/v1", name="x", model="m")


@pytest.mark.parametrize("engine_cmd", [None, "false"])
def test_a_port_placeholder_nothing_fills_in_is_a_clear_error(
    here: Path, engine_cmd: str | None
) -> None:
    """``{port}`` without a launch command that has it was a traceback (httpx InvalidURL,
    or a ValueError in the launch plan): now one line naming engine.endpoint, exit 2."""
    args = [
        "collect", "--endpoint", "http://127.0.0.1:{port}/v1", "--model", "m", "--rates", "1",
        "--duration", "1", "--label", "t", "--out", "run.json", "--no-progress",
    ]  # fmt: skip
    if engine_cmd is not None:
        args += ["--engine-cmd", engine_cmd]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "error: engine.endpoint: has {port}, which only an engine collect starts" in (
        result.output
    )
    assert "Traceback" not in result.output and not (here / "run.json").exists()


def test_init_refuses_a_port_placeholder(here: Path) -> None:
    result = CliRunner().invoke(cli, ["init", "--endpoint", "http://127.0.0.1:{port}/v1"])
    assert result.exit_code == 2, result.output
    assert "has {port}, which only an engine that collect starts fills in" in result.output
    assert not (here / "specs").exists()
