"""``tokenwatt report --out`` aimed at an input run file, or at a disk that fails: exit 2,
the run record kept byte for byte, no temporary file left."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.runs_factory import make_run, tuned_run
from tokenwatt.analysis.summarise import summarise
from tokenwatt.cli import cli
from tokenwatt.errors import InputError
from tokenwatt.records import RunRecord
from tokenwatt.records.runs_io import load_runs, write_report


def _write(folder: Path, run: RunRecord) -> Path:
    path = folder / f"{run.label}.json"
    path.write_text(run.model_dump_json(indent=2), encoding="utf-8")
    return path


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "runs").mkdir()
    _write(tmp_path / "runs", make_run())
    _write(tmp_path / "runs", tuned_run())
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("out", ["runs/vllm-default.json", "runs/../runs/vllm-fp8kv.json"])
def test_out_that_is_an_input_run_is_refused_even_with_force(workdir: Path, out: str) -> None:
    runs = sorted((workdir / "runs").iterdir())
    before = {p: p.read_bytes() for p in runs}
    result = CliRunner().invoke(
        cli,
        [
            "report",
            "runs/vllm-default.json",
            "runs/vllm-fp8kv.json",
            "--title",
            "t",
            "--out",
            out,
            "--force",
        ],
    )
    assert result.exit_code == 2, result.output
    assert f"error: {out}: --out: is the run file runs/vllm-" in result.output
    assert "would destroy the run record" in result.output
    assert {p: p.read_bytes() for p in runs} == before


def test_out_through_a_link_to_an_input_is_refused(workdir: Path) -> None:
    link = workdir / "link.json"
    link.symlink_to(workdir / "runs" / "vllm-fp8kv.json")
    paths = [workdir / "runs" / "vllm-default.json", workdir / "runs" / "vllm-fp8kv.json"]
    runs = load_runs(paths)
    record = summarise(runs, title="t")
    with pytest.raises(InputError, match="is the run file"):
        write_report(record, link, force=True, inputs=paths)


def test_disk_full_while_writing_is_an_input_error_and_leaves_nothing(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [workdir / "runs" / "vllm-default.json", workdir / "runs" / "vllm-fp8kv.json"]
    record = summarise(load_runs(paths), title="t")
    real_replace = Path.replace

    def full(self: Path, target: str | os.PathLike[str]) -> Path:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "replace", full)
    out = workdir / "reports" / "t.json"
    with pytest.raises(InputError) as exc:
        write_report(record, out, inputs=paths)
    monkeypatch.setattr(Path, "replace", real_replace)
    assert [str(p) for p in exc.value.problems] == [f"{out}: cannot write: No space left on device"]
    assert list((workdir / "reports").iterdir()) == []
