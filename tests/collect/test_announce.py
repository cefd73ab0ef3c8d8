"""A measurement announced once its inputs are checked (``measure_configuration(announce=)``,
what ``tokenwatt replicate`` uses): the inputs are checked once, the announcement comes after
the checks and before the checks' lines, and a refused input is never announced."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

import tokenwatt.collect.run as run
from tokenwatt.collect.measure.progress import NullReporter
from tokenwatt.collect.plan.options import CollectOptions
from tokenwatt.errors import EngineError, InputError
from tokenwatt.records import load_spec
from tokenwatt.records.spec.spec import PowerSpec

SIM_SPEC = Path(__file__).resolve().parents[1] / "fixtures" / "sim.spec.yaml"


class _Said(NullReporter):
    def __init__(self, said: list[str]) -> None:
        self.said = said

    def line(self, text: str) -> None:
        self.said.append("line: " + text.splitlines()[0])

    def warning(self, text: str) -> None:
        self.said.append("warning: " + text)


def _dead_endpoint() -> str:
    with socket.socket() as s:  # a port nothing listens on once it is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _spec(tmp_path: Path, **engine: Any) -> Path:
    spec = load_spec(SIM_SPEC)
    spec = spec.model_copy(
        update={
            "hardware": spec.hardware.model_copy(update={"adapter": "none"}),
            "engine": spec.engine.model_copy(update={"endpoint": _dead_endpoint(), **engine}),
            "power": PowerSpec(source="none"),
        }
    )
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json")))
    return path


def _opts(spec: Path, tmp_path: Path, **kw: Any) -> CollectOptions:
    return CollectOptions(
        spec_path=spec, label="p", role="baseline", out=tmp_path / "run.json", progress=False, **kw
    )


def _counting_prepare(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = run.prepare

    def prepare(opts: CollectOptions, reporter: Any) -> run.PreparedRun:
        calls.append(1)
        return real(opts, reporter)

    monkeypatch.setattr(run, "prepare", prepare)
    return calls


def test_the_inputs_are_checked_once_and_announced_before_their_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting_prepare(monkeypatch)
    said: list[str] = []
    opts = _opts(_spec(tmp_path), tmp_path, accuracy=False)
    with pytest.raises(EngineError):  # nothing listens: the run stops at the engine's probe
        run.measure_configuration(opts, _Said(said), announce=lambda: said.append("announced"))
    assert calls == [1]
    assert said[0] == "announced"
    assert len(said) > 1 and all(s.startswith("line: ") for s in said[1:])
    assert not opts.out.exists()


def test_without_announce_the_lines_come_as_the_checks_make_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting_prepare(monkeypatch)
    said: list[str] = []
    with pytest.raises(EngineError):
        run.measure_configuration(_opts(_spec(tmp_path), tmp_path, accuracy=False), _Said(said))
    assert calls == [1] and said and "announced" not in said


def test_a_refused_input_is_never_announced(tmp_path: Path) -> None:
    said: list[str] = []
    spec = _spec(tmp_path, api_key_env="TOKENWATT_TEST_KEY_NOT_SET")
    with pytest.raises(InputError, match="TOKENWATT_TEST_KEY_NOT_SET"):
        run.measure_configuration(
            _opts(spec, tmp_path, accuracy=False, environ={}),
            _Said(said),
            announce=lambda: said.append("announced"),
        )
    assert said == []
