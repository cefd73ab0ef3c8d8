"""``tokenwatt replicate``: measure a published configuration again and say whether its
headline figures still hold (registered on the group in :mod:`tokenwatt.cli.group`).

The configuration is measured from what its records hold: the run record the report cites,
when the archive keeps it (its effective spec, engine command and flags, mode), else the
report's spec with the configuration's KV-cache dtype and mode. The new run record goes to
``runs/replications/``, the replication record to ``replications/``; the report is never
changed. The verdicts are :mod:`tokenwatt.analysis.report.replication`'s.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import sys
from pathlib import Path
from typing import Any

import click

from tokenwatt.cli.exits import errors_to_exit
from tokenwatt.errors import InputError, Problem

DISAGREES_STATUS = 3
"""Exit status when the replication disagrees with the published figures (0 when it agrees
or is inconclusive); distinct from 1 (an error: the engine cannot be reached) and 2 (bad
input), so a script can tell a regression from an outage.
A run that did not complete exits as ``collect`` does (128 + the signal, or 1) and writes
no replication record."""


@click.command("replicate")
@click.argument("report_file", metavar="REPORT.json", type=click.Path(path_type=Path))
@click.option(
    "--config", "label", help="The configuration's label (needed when there are several)."
)
@click.option("--endpoint", help="The engine's URL, when it is not where the record says.")
@click.option(
    "--archive",
    type=click.Path(path_type=Path, file_okay=False),
    help="The archive's folder (holding reports/, runs/, replications/); default: the "
    "folder above the report's.",
)
@click.option(
    "--engine-cmd",
    help="Start the engine with this command line instead of the one the record keeps "
    "(to measure a changed flag: the replication names the settings that differ).",
)
@click.option("--no-progress", is_flag=True, help="No live display while measuring.")
@errors_to_exit
def replicate(
    report_file: Path,
    label: str | None,
    endpoint: str | None,
    archive: Path | None,
    engine_cmd: str | None,
    no_progress: bool,
) -> None:
    """Measure a published configuration again and compare its headline figures.

    Writes the run record under runs/replications/ and a replication record under
    replications/ that the note's page shows; exits 3 when a figure disagrees.
    """
    import shlex

    from tokenwatt.cli.collect_report import measured_or_exit, print_collect_end
    from tokenwatt.cli.progress import TerminalReporter
    from tokenwatt.collect import CollectOptions
    from tokenwatt.files import atomic_write_text
    from tokenwatt.records import load_report
    from tokenwatt.redact import scrub

    report = load_report(report_file)
    root = archive or report_file.resolve().parent.parent
    _check_archive(report_file, root, archive is not None)
    cfg_index = _config_index(report, label, report_file)
    cfg = report.configs[cfg_index]
    spec_text, mode, source, folder = _what_to_measure(report, cfg_index, root)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    # Labels may hold any printable text ("/", ".."): never a path in a file name.
    name = f"{report.id}--{_SAFE.sub('-', cfg.label)}--{stamp}"
    run_dir = root / "runs" / "replications"
    made = _writable_folders(root, [run_dir, root / "replications"])
    # Beside the original spec, so that the paths in it (suite, trace, dataset) resolve as
    # they did; removed after the run, whose record keeps the spec it measured with.
    spec_path = folder / f".{name}.spec.yaml"
    atomic_write_text(spec_path, spec_text)
    out = run_dir / f"{name}.json"
    command = scrub(shlex.join(["tokenwatt", *sys.argv[1:]]))
    opts = CollectOptions(
        spec_path=spec_path,
        label=cfg.label,
        role=cfg.effective_role,  # type: ignore[arg-type]
        out=out,
        mode=mode,  # type: ignore[arg-type]
        endpoint=endpoint,
        engine_cmd=engine_cmd,
        accuracy=cfg.accuracy is not None,
        command=command,
        progress=not no_progress,
    )
    given = f"{report_file} (the spec of {cfg.label})"

    def announce() -> None:  # once every input has been checked, before the first request
        click.echo(f"replicating {cfg.label} of {report.id} from its {source} into {out}", err=True)

    reporter = TerminalReporter(live=opts.progress)
    try:
        measured = measured_or_exit(opts, reporter, "nothing written", announce)
    except InputError as exc:  # named after what the user gave, not the temporary spec
        raise _as_given(exc, spec_path, given) from None
    finally:
        spec_path.unlink(missing_ok=True)
        _remove_if_empty(made)
    status = print_collect_end(measured, out, reporter)
    if status or not measured.complete:
        click.echo(
            f"no replication record written: the run in {out} is incomplete or measured "
            "nothing (see above)",
            err=True,
        )
        sys.exit(status or 1)
    record = _replication(report_file, report, cfg_index, out, root, command)
    target = root / "replications" / f"{name}.json"
    from tokenwatt.records_io import write_replication

    write_replication(record, target)
    _print(record, target)
    if record.verdict == "disagrees":
        sys.exit(DISAGREES_STATUS)


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _as_given(exc: InputError, temporary: Path, given: str) -> InputError:
    """``exc`` with the temporary spec's path, wherever it appears, replaced by ``given``."""
    names = (str(temporary), temporary.name)

    def swap(text: str) -> str:
        for name in names:
            text = text.replace(name, given)
        return text

    return InputError([Problem(swap(p.file), p.field, swap(p.message)) for p in exc.problems])


def _check_archive(report_file: Path, root: Path, given: bool) -> None:
    """Refuse an ``--archive`` that does not hold the report (a mistyped folder would get
    a replication whose report it lacks)."""
    if given and report_file.resolve().parent != (root / "reports").resolve():
        raise InputError(
            [
                Problem(
                    str(root),
                    "--archive",
                    f"does not hold {report_file} in its reports/ folder: pass the folder "
                    "above the report's",
                )
            ]
        )


def _writable_folders(root: Path, folders: list[Path]) -> list[Path]:
    """Make ``folders`` (under ``root``) and check that they can be written, before anything
    is measured; returns the ones made, deepest first, for :func:`_remove_if_empty`.

    Raises:
        InputError: a folder cannot be made (a file in its place, no permission) or written.
    """
    made: list[Path] = []
    for folder in folders:
        missing = [p for p in [folder, *folder.parents] if not p.exists() and root in p.parents]
        try:
            folder.mkdir(parents=True, exist_ok=True)
            made += missing
            probe = folder / f".tokenwatt-write-check-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            _remove_if_empty(made)
            raise InputError(
                [
                    Problem(
                        str(folder),
                        "",
                        f"cannot be written ({exc.strerror or exc}); nothing was measured",
                    )
                ]
            ) from None
    return made


def _remove_if_empty(folders: list[Path]) -> None:
    """Remove the folders replicate made when nothing was written into them."""
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):  # not empty (or already gone): kept
            folder.rmdir()


def _config_index(report: Any, label: str | None, path: Path) -> int:
    labels = [c.label for c in report.configs]
    if label is None and len(labels) == 1:
        return 0
    if label in labels:
        return labels.index(label)
    if label is None:
        said = f"the report has {len(labels)} configurations: pass --config LABEL, one of"
    else:
        said = f"the report has no configuration {label!r}; its configurations:"
    raise InputError([Problem(str(path), "--config", f"{said} {', '.join(labels)}")])


def _spec_folder(command: str, root: Path) -> Path:
    """Where the original spec file was: the folder of the ``--spec`` the run's command
    names, when it is under ``root``; else ``root/specs`` when there is one; else ``root``."""
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        words = []
    for i, word in enumerate(words):
        given = words[i + 1] if word == "--spec" and i + 1 < len(words) else None
        if word.startswith("--spec="):
            given = word.split("=", 1)[1]
        if given:
            folder = (root / given).parent
            if folder.is_dir():
                return folder
    return root / "specs" if (root / "specs").is_dir() else root


def _what_to_measure(report: Any, index: int, root: Path) -> tuple[str, str, str, Path]:
    """The spec's YAML text, the mode, where they came from (the run record the report
    cites for the configuration when the archive holds it unchanged, else the report) and
    the folder of the original spec file (:func:`_spec_folder`)."""
    import yaml

    from tokenwatt.files import file_sha256

    cfg = report.configs[index]
    cited = report.run_files[index] if index < len(report.run_files) else None
    path = root / cited.path if cited is not None else None
    present = cited is not None and path is not None and path.is_file()
    if cited is not None and path is not None and present and file_sha256(path) == cited.sha256:
        from tokenwatt.records_io import load_run

        run = load_run(path).run
        spec = run.spec
        mode, source = run.mode, f"run record {cited.path}"
        command = run.command
    elif report.spec is not None:
        spec = report.spec
        kv = cfg.settings.get("kv_dtype")
        if kv:
            spec = spec.model_copy(update={"model": spec.model.model_copy(update={"kv_dtype": kv})})
        why = "has changed since the report was made" if present else "is not in the archive"
        mode, source = cfg.mode or "full", f"report record (its run record {why})"
        command = report.reproduce
    else:
        raise InputError(
            [
                Problem(
                    str(root / "reports" / f"{report.id}.json"),
                    "spec",
                    "keeps no spec and its run record is not in the archive: there is "
                    "nothing to measure it again from",
                )
            ]
        )
    data = spec.model_dump(mode="json", exclude_none=True)
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    return text, mode, source, _spec_folder(command, root)


def _replication(
    report_file: Path, report: Any, index: int, run_path: Path, root: Path, command: str
) -> Any:
    import dataclasses

    from tokenwatt import analysis
    from tokenwatt.files import file_sha256
    from tokenwatt.records import ReplicationV1
    from tokenwatt.records_io import load_run

    item = load_run(run_path)
    old = report.configs[index]
    as_base = item.run.model_copy(update={"role": "baseline"})
    demo = report.demo or item.run.simulated or item.run.mode == "smoke"
    summary = analysis.summarise(
        [dataclasses.replace(item, run=as_base)],
        title=report.title,
        report_id=report.id,
        demo=demo,
    )
    new = summary.configs[0].model_copy(update={"role": old.role, "key": old.key})
    checks = analysis.replication_checks(old, new)
    return ReplicationV1(
        report_id=report.id,
        report_sha256=file_sha256(report_file),
        config=old.label,
        measured_at=item.run.finished or item.run.started,
        run_file=run_path.resolve().relative_to(root.resolve()).as_posix(),
        run_sha256=item.sha256,
        command=command,
        fingerprint=item.run.fingerprint,
        changed_settings=analysis.changed_settings(old.settings, new.settings),
        measured=new,
        figures=checks,
        verdict=analysis.replication_verdict(checks),
    )


def _print(record: Any, target: Path) -> None:
    from tokenwatt.analysis import FIGURE_NAMES, SETTING_LABELS, fixed
    from tokenwatt.text import terminal_safe

    def num(v: float | None) -> str:
        return "—" if v is None else fixed(v, 1)

    def span(low: float | None, high: float | None) -> str:
        if low is None:
            return ""
        return f" [{num(low)}, {num(high) if high is not None else '∞'}]"

    for c in record.figures:
        line = (
            f"{FIGURE_NAMES[c.figure]}: published {num(c.old)}{span(c.old_low, c.old_high)}, "
            f"now {num(c.new)}{span(c.new_low, c.new_high)} → {c.verdict}"
        )
        click.echo(terminal_safe(line + (f" ({c.reason})" if c.reason else "")))
    if record.changed_settings:
        names = [SETTING_LABELS.get(n, n) for n in record.changed_settings]
        click.echo(terminal_safe(f"settings that differ: {', '.join(names)}"))
    click.echo(f"replication {record.verdict}; wrote {target}")
