"""A generated archive of demo notes on the simulated engine: report records made by the
real ``summarise`` from run records shaped like the simulator's, across several models,
hardware names and engines, with gate failures and inconclusive results.

Each configuration's goodput, p99 TPOT and accuracy are chosen so that the frontier of
each model and hardware can be worked out by hand: :data:`EXPECTED_FRONTIER` is that hand
computation, not the code's output.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

from tests.runs_factory import make_run, seed_spec
from tokenwatt import analysis
from tokenwatt.records import ReportV3, RunInput, SearchResult


@dataclass(frozen=True)
class Cfg:
    """One configuration: label, goodput (tok/s), p99 TPOT (ms), accuracy score (%) and
    whether its result is inconclusive."""

    label: str
    goodput: float
    tpot_ms: float
    score: float = 96.0
    inconclusive: bool = False


@dataclass(frozen=True)
class Note:
    id: str
    model: str
    gpu: str
    gpus: int
    engine: str
    version: str
    configs: tuple[Cfg, ...]


def _group_a() -> list[Note]:
    """Model A on 1× H100: interactivity = 1000/TPOT; points (interactivity, goodput):
    a-base (20, 1000), a-fast (25, 900), a-mid (22.2, 800, beaten by a-fast), a-thin
    (40, 500), a-gatefail (50, 3000, fails the gate), a-inconc (45, 2500, inconclusive)."""
    return [
        Note(
            "a-one",
            "model-a",
            "SIM H100",
            1,
            "tokenwatt-sim",
            "0.1",
            (Cfg("a-base", 1000, 50), Cfg("a-fast", 900, 40), Cfg("a-mid", 800, 45)),
        ),
        Note(
            "a-two",
            "model-a",
            "SIM H100",
            1,
            "tokenwatt-sim",
            "0.2",
            (Cfg("a-base2", 400, 50), Cfg("a-thin", 500, 25), Cfg("a-gatefail", 3000, 20, 80.0)),
        ),
        Note(
            "a-three",
            "model-a",
            "SIM H100",
            1,
            "other-engine",
            "1.0",
            (Cfg("a-base3", 300, 60), Cfg("a-inconc", 2500, 22.2, inconclusive=True)),
        ),
    ]


EXPECTED_FRONTIER: dict[tuple[str, str], set[str]] = {
    ("model-a", "1× SIM H100"): {"a-base", "a-fast", "a-thin"},
    # model-b on 2 cards: per card halves goodput. (25, 600/2), (50, 400/2), (20, 700/2):
    # all three on the frontier; b-slow (20, 100/2) is beaten by b-base.
    ("model-b", "2× SIM A100"): {"b-base", "b-quick", "b-wide"},
}
"""The frontier of the goodput view per (model, hardware), worked out by hand from the
numbers in :func:`_group_a` and :func:`_group_b`."""


def _group_b() -> list[Note]:
    return [
        Note(
            "b-one",
            "model-b",
            "SIM A100",
            2,
            "tokenwatt-sim",
            "0.1",
            (Cfg("b-base", 600, 40), Cfg("b-quick", 400, 20), Cfg("b-slow", 100, 50)),
        ),
        Note(
            "b-two",
            "model-b",
            "SIM A100",
            2,
            "tokenwatt-sim",
            "0.2",
            (Cfg("b-wide", 700, 50),),
        ),
    ]


def _filler(count: int) -> list[Note]:
    """Notes of other models, one per model and hardware: each baseline alone on its
    frontier, its tuned configuration beaten on both axes."""
    notes = []
    for i in range(count):
        notes.append(
            Note(
                f"fill-{i:02d}",
                f"model-f{i % 4}",
                f"SIM GPU{i}",
                1 + i % 2,
                "tokenwatt-sim" if i % 3 else "other-engine",
                f"0.{i % 5}",
                (Cfg(f"f{i}-base", 900 + i, 30), Cfg(f"f{i}-tuned", 800 + i, 35)),
            )
        )
    return notes


def notes(fillers: int = 25) -> list[Note]:
    """The whole archive: groups A and B and ``fillers`` other notes (30 with the default)."""
    return [*_group_a(), *_group_b(), *_filler(fillers)]


def _run(note: Note, cfg: Cfg, role: str, when: dt.datetime) -> RunInput:
    spec = seed_spec(model={"name": note.model})
    ttft = 300.0
    run = make_run(
        cfg.label,
        role,
        spec=spec,
        goodput=cfg.goodput,
        repeat_goodputs=(cfg.goodput + 10, cfg.goodput - 10),
        ttft_p99s=(ttft, ttft),
        tpot_p99s=(cfg.tpot_ms, cfg.tpot_ms),
        score_pct=cfg.score,
        simulated=True,
        kv_dtype="fp8" if role == "tuned" else "bf16",
    )
    env = run.environment.model_copy(
        update={
            "gpu_name": note.gpu,
            "gpu_count": note.gpus,
            "engine_name": note.engine,
            "engine_version": note.version,
        }
    )
    update: dict[str, object] = {"environment": env, "started": when, "finished": when}
    if cfg.inconclusive:
        assert run.result is not None
        update["result"] = SearchResult(
            **{
                **run.result.model_dump(),
                "status": "inconclusive",
                "status_reason": "the engine refused every request",
            }
        )
    run = run.model_copy(update=update)
    return RunInput(name=f"runs/{note.id}-{cfg.label}.json", sha256="0" * 64, run=run)


def report(note: Note, day: int = 0) -> ReportV3:
    """The note's report record, as ``tokenwatt report --demo`` makes it."""
    when = dt.datetime(2026, 11, 1, tzinfo=dt.UTC) + dt.timedelta(days=day)
    runs = [
        _run(note, cfg, "baseline" if i == 0 else "tuned", when)
        for i, cfg in enumerate(note.configs)
    ]
    return analysis.summarise(runs, title=f"Demo note {note.id}", report_id=note.id, demo=True)


def write_archive(root: Path, fillers: int = 25) -> list[ReportV3]:
    """Write the archive's report records into ``root/reports/`` and return them."""
    folder = root / "reports"
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for day, note in enumerate(notes(fillers)):
        rec = report(note, day)
        (folder / f"{note.id}.json").write_text(rec.model_dump_json(indent=2), encoding="utf-8")
        out.append(rec)
    return out


def reload(path: Path) -> dict[str, object]:
    """A JSON file's content."""
    data: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return data
