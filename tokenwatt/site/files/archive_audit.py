"""What ``tokenwatt build`` checks of the archive around its reports: that every run record a
report (or a replication) cites is still the file it was made from, or one an erratum
accepted (:func:`changed_runs`), and that every replication record names a report and a
configuration the archive has, validated before its note shows it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenwatt.errors import Problem, RecordError
from tokenwatt.files import file_sha256

_MAX_REPORT_BYTES = 64 << 20  # records.load.MAX_JSON_BYTES, without importing pydantic


def changed_runs(report_path: Path, root: Path) -> list[Problem]:
    """One problem per run record the report at ``report_path`` cites (``run_files``) that
    is not, under ``root`` (the archive: the folder above ``reports/``), the file the report
    was made from, or the one a later erratum accepted (``updates[*].run_file`` and
    ``run_sha256``, :func:`_accepted`): changed (its SHA-256 differs), or missing from an
    archive that keeps run records (a ``runs/`` folder) when it was cited there. Checked on
    every build, cached page or not: a run record edited or deleted after ``tokenwatt
    report`` would otherwise stand behind a page it no longer agrees with. A cited run in
    an archive without ``runs/``, or outside it, is not shipped, as the page's Reproduce
    section says."""
    try:
        if report_path.stat().st_size > _MAX_REPORT_BYTES:
            return []  # the loader refuses it
        data = json.loads(report_path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return []  # the loader says what is wrong with the report itself
    cited = data.get("run_files") if isinstance(data, dict) else None
    accepted = _accepted(data)
    keeps_runs = (root / "runs").is_dir()
    out: list[Problem] = []
    for i, entry in enumerate(cited if isinstance(cited, list) else []):
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            continue
        path = entry["path"]
        expected = accepted[path] if path in accepted else entry.get("sha256")
        actual = _sha256(root / path)
        where = f"run_files[{i}].sha256"
        if actual is None and expected is not None and keeps_runs and path.startswith("runs/"):
            out.append(Problem(str(report_path), where, _missing(path)))
        elif actual is not None and actual != expected:
            out.append(Problem(str(report_path), where, _changed(path, actual, expected)))
    return out


_FIXES = (
    "make the report again from the run records (tokenwatt report), put the run record "
    "back as it was, or record the change in an erratum that the page shows (tokenwatt "
    "erratum REPORT --run {path} --text WHY)"
)


def _missing(path: str) -> str:
    return f"{path} is missing from the archive since the report was made: " + _FIXES.format(
        path=path
    )


def _changed(path: str, actual: str, expected: object) -> str:
    kept = str(expected)[:12] + "…" if expected is not None else "it removed"
    return (
        f"{path} has changed since the report was made (its SHA-256 is {actual[:12]}…, the "
        f"report keeps {kept}): " + _FIXES.format(path=path)
    )


def _accepted(data: object) -> dict[str, str | None]:
    """The run records the report's errata accept, by path: the SHA-256 the latest update
    about each gives (None: removed)."""
    updates = data.get("updates") if isinstance(data, dict) else None
    dated = [u for u in (updates if isinstance(updates, list) else []) if isinstance(u, dict)]
    out: dict[str, str | None] = {}
    for u in sorted(dated, key=lambda u: str(u.get("date", ""))):
        if isinstance(u.get("run_file"), str):
            sha = u.get("run_sha256")
            out[u["run_file"]] = sha if isinstance(sha, str) else None
    return out


def _sha256(path: Path) -> str | None:
    """The file's SHA-256 (hex); None when it is absent or unreadable."""
    try:
        return file_sha256(path) if path.is_file() else None
    except OSError:
        return None


def archive_run_files(root: Path) -> frozenset[str]:
    """The run records under ``root/runs/`` as ``runs/...`` paths (empty when none): a
    page's Reproduce section says which of the run files it names are not shipped."""
    try:
        found = (root / "runs").rglob("*.json")
        return frozenset(p.relative_to(root).as_posix() for p in found if p.is_file())
    except OSError:
        return frozenset()


@dataclass(frozen=True)
class Replication:
    """A replication record as read: its file, its bytes and the report id it names."""

    file: str
    raw: bytes
    report_id: str


def load_replications(folder: Path) -> tuple[list[Replication], list[Problem]]:
    """The replication records under ``folder`` (``replications/`` beside ``reports/``),
    read as bytes with their report id; each is validated when its report's page is
    rendered. A file that is not JSON naming a report is a problem here."""
    out: list[Replication] = []
    problems: list[Problem] = []
    if not folder.exists() and not folder.is_symlink():
        return out, problems
    try:
        found = sorted(p for p in folder.iterdir() if p.suffix == ".json")
    except OSError as exc:
        what = "is not a folder" if not folder.is_dir() else f"cannot be read ({exc.strerror})"
        return out, [Problem(str(folder), "", f"{what}: replication records go in this folder")]
    for path in (p for p in found if not p.name.startswith(".")):
        try:
            raw = path.read_bytes()
            data = json.loads(raw) if len(raw) <= _MAX_REPORT_BYTES else None
        except (OSError, ValueError, RecursionError) as exc:
            problems.append(Problem(str(path), "", f"cannot read a replication record: {exc}"))
            continue
        rid = data.get("report_id") if isinstance(data, dict) else None
        if not isinstance(rid, str):
            problems.append(Problem(str(path), "report_id", "names no report"))
            continue
        out.append(Replication(str(path), raw, rid))
    return out, problems


def orphan_replications(reps: list[Replication], files: list[Path]) -> list[Problem]:
    """One problem per replication whose report is not in the archive."""
    if not reps:
        return []
    ids = set()
    for path in files:
        try:
            ids.add(report_id_of(path.read_bytes()))
        except OSError:
            continue  # the loader says so
    return [
        Problem(r.file, "report_id", f"names {r.report_id!r}, which no report record has")
        for r in reps
        if r.report_id not in ids
    ]


def report_id_of(raw: bytes) -> str | None:
    """The report's id as its JSON gives it (None when unreadable: the loader says why)."""
    try:
        data = json.loads(raw) if len(raw) <= _MAX_REPORT_BYTES else None
    except (ValueError, RecursionError):
        return None
    rid = data.get("id") if isinstance(data, dict) else None
    return rid if isinstance(rid, str) else None


def validated_replications(
    reps: list[Replication],
) -> tuple[list[tuple[str, Any]], list[Problem]]:
    """The replication records validated (:class:`~tokenwatt.records.ReplicationV1`) with
    their files, and one problem per problem of any."""
    from tokenwatt.records import ReplicationV1, validate

    out: list[tuple[str, Any]] = []
    problems: list[Problem] = []
    for r in reps:
        try:
            out.append((r.file, validate(ReplicationV1, json.loads(r.raw), r.file)))
        except RecordError as exc:
            problems += exc.problems
    return out, problems


def replication_problems(report: Any, reps: list[tuple[str, Any]], root: Path) -> list[Problem]:
    """What makes a valid replication record unfit for its note: a configuration the
    report lacks, a simulated measurement on a note that is no demo, or its run record
    changed or missing from an archive that keeps run records (as for a report's own)."""
    labels = {c.label for c in report.configs}
    keeps_runs = (root / "runs").is_dir()
    out: list[Problem] = []
    for file, rep in reps:
        if rep.config not in labels:
            out.append(Problem(file, "config", f"names {rep.config!r}, which {report.id} has not"))
        if rep.measured.simulated and not report.demo:
            out.append(
                Problem(
                    file,
                    "measured.simulated",
                    f"is a simulated measurement; {report.id} is no demo, so it cannot show it",
                )
            )
        actual = _sha256(root / rep.run_file)
        if keeps_runs and actual != rep.run_sha256:
            said = (
                _missing(rep.run_file)
                if actual is None
                else _changed(rep.run_file, actual, rep.run_sha256)
            )
            out.append(Problem(file, "run_sha256", said.split(": make the report")[0]))
    return out
