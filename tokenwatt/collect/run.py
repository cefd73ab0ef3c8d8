"""``tokenwatt collect`` (= ``tokenwatt run``): measure one configuration into a run record.

Two steps. :func:`prepare` turns the options into a :class:`PreparedRun`: the spec with its
mode and flags applied, the API key read from the variable the spec names, the accuracy
suite and the token counter loaded, every input checked. :func:`execute` then probes the
engine (launching it first when the spec says so), opens the power meter, runs the SLO
search (methods/goodput.md) with the load generator, scraping ``/metrics`` and reading
power per window, measures the repeats at the found rate, computes MBU when the model's
geometry is known, runs the accuracy suite and writes the
:class:`~tokenwatt.records.RunRecord`. Nothing here prints: what the user sees goes through
the caller's :class:`~tokenwatt.collect.measure.progress.Reporter`.

The record is written atomically (a temporary file in the same folder, then
``os.replace``), after every window as a checkpoint and at the end. Ctrl-C or an engine that
stops answering ends the run with a valid record marked ``complete: false`` that keeps
everything measured so far.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tokenwatt import __version__
from tokenwatt.analysis import METER_NOT_OPENED
from tokenwatt.collect.accuracy.runner import LoadedSuite, read_suite, run_suite
from tokenwatt.collect.engine.endpoints import api_base_url
from tokenwatt.collect.engine.engine_proc import (
    LaunchedEngine,
    apply_engine_cmd,
    check_launch_options,
    launched_engine,
    track_engine,
)
from tokenwatt.collect.engine.probes import EngineInfo, probe_engine, scan_engine_log
from tokenwatt.collect.load.closedloop import closed_loop_workers
from tokenwatt.collect.load.pool.choice import pool_for
from tokenwatt.collect.load.pool.workers import resolve_workers, usable_cores
from tokenwatt.collect.measure.instruments import Instruments
from tokenwatt.collect.measure.mbu_step import mbu_for
from tokenwatt.collect.measure.measurement import Measurement, SearchSetup
from tokenwatt.collect.measure.progress import NullReporter, Reporter
from tokenwatt.collect.measure.request_log import RequestLogWriter, log_path
from tokenwatt.collect.measure.stopping import GracefulStop, StopSignal, failure_reason
from tokenwatt.collect.measure.window import WindowRunner
from tokenwatt.collect.plan.modes import PRESETS, mode_lines, mode_overrides, not_applying
from tokenwatt.collect.plan.options import CollectOptions
from tokenwatt.collect.plan.point import FLAGS_SPEC, reported_engine_line, spec_yaml
from tokenwatt.collect.plan.preflight import (
    check_served_model,
    check_vocab_fits,
    check_workload_fits,
    model_from_server,
)
from tokenwatt.collect.plan.run_spec import run_spec
from tokenwatt.collect.plan.runfile import (
    check_run_options,
    check_trace_file,
    environment_from,
    git_commit,
    read_api_key,
    suite_path,
    write_record,
)
from tokenwatt.collect.workload.dataset import pin_dataset
from tokenwatt.collect.workload.tokens import TokenCounter, load_token_counter
from tokenwatt.collect.workload.workload import WorkloadStream, workload_for
from tokenwatt.errors import EngineError, InputError, Problem, TelemetryError, named_by
from tokenwatt.files import exclusive_lock
from tokenwatt.netpath import ProxyChoice, network_path
from tokenwatt.records import (
    SIM_VERSION,
    ModeOverride,
    PromptStats,
    RunRecord,
    Spec,
    ToolInfo,
    fingerprint,
    unstated_fields,
)
from tokenwatt.telemetry import PowerMeter


class EngineDiedError(EngineError):
    """The engine stopped answering in the middle of the run."""


def new_record(opts: CollectOptions, spec: Spec) -> RunRecord:
    """The run record as it stands before the first window (``complete`` false)."""
    record = RunRecord(
        tool=ToolInfo(version=__version__, git_commit=git_commit(Path(__file__).resolve().parent)),
        label=opts.label,
        role=opts.role,
        mode=opts.mode,
        spec=spec,
        fingerprint=fingerprint(spec),
        spec_unstated=unstated_fields(spec),
        command=opts.command,
        started=dt.datetime.now(dt.UTC),
        complete=False,
        incomplete_reason="in progress",
    )
    if not PRESETS[opts.mode].reportable:
        record.not_covered.append("Smoke mode: a pipeline check; its numbers are not measurements")
    return record


@dataclass(frozen=True)
class PreparedRun:
    """A run checked and ready to start: what :func:`prepare` made of the options.

    Attributes:
        opts: the command's options.
        spec: the spec the run measures (mode, flags, overrides, ``--engine-cmd`` and the
            dataset's hash applied).
        overrides: the spec values the mode replaced (stored in the record).
        api_key: the engine's bearer token, read from the variable the spec names (None:
            none); never stored.
        suite: the accuracy suite, read and validated whole (None: not run).
        count_tokens: the model's tokenizer, loaded and checked (None: ``model.tokenizer``
            unset).
    """

    opts: CollectOptions
    spec: Spec
    overrides: tuple[ModeOverride, ...]
    api_key: str | None
    suite: LoadedSuite | None
    count_tokens: TokenCounter | None


def measure_configuration(
    opts: CollectOptions,
    reporter: Reporter | None = None,
    *,
    announce: Callable[[], None] | None = None,
) -> RunRecord:
    """Measure one configuration and write its run record to ``opts.out``.

    ``reporter`` is told every line the user should see while the run is prepared and
    measured (:class:`~tokenwatt.collect.measure.progress.Reporter`; None: nothing is
    shown). Nothing here prints. ``announce``, if given, is called once every input has
    been checked and before anything is measured; the lines of the checks (the effective
    spec, the mode's) are shown after it, so that a command can say what it is about to
    measure only once it can (``tokenwatt replicate``), with each input read once.

    Returns:
        The record as written; ``complete`` is False when the run was interrupted (Ctrl-C,
        SIGTERM, SIGHUP) or the engine died, with ``interrupted`` naming which and
        ``incomplete_reason`` saying it in words.

    Raises:
        SpecError: the spec is invalid (nothing is written).
        InputError: the API key variable is unset, the suite or engine log is unreadable.
        EngineError: the engine cannot be reached at the start (nothing is written).
        StopSignal: SIGTERM or SIGHUP before the first window (nothing is written).
        KeyboardInterrupt: Ctrl-C before the first window (nothing is written).
        Exception: anything unexpected is raised on; once the record exists it is written
            first, ``complete: false`` with ``incomplete_reason`` naming the error
            (:func:`tokenwatt.collect.measure.stopping.failure_reason`).
    """
    reporter = reporter if reporter is not None else NullReporter()
    # From the start: a signal during the checks stops the run cleanly (lock released).
    with GracefulStop() as stop:
        if announce is None:
            plan = prepare(opts, reporter)
        else:
            held = _HeldLines()
            plan = prepare(opts, held)
            announce()
            held.show(reporter)
        return execute(plan, reporter, stop)


class _HeldLines(NullReporter):
    """A reporter that keeps the lines and warnings of the checks, to show them later."""

    def __init__(self) -> None:
        self.held: list[tuple[bool, str]] = []  # (a warning, its text), in order

    def line(self, text: str) -> None:
        """Keeps the line."""
        self.held.append((False, text))

    def warning(self, text: str) -> None:
        """Keeps the warning."""
        self.held.append((True, text))

    def show(self, reporter: Reporter) -> None:
        """Hand every kept line and warning to ``reporter``, in order."""
        for warning, text in self.held:
            (reporter.warning if warning else reporter.line)(text)


def prepare(opts: CollectOptions, reporter: Reporter) -> PreparedRun:
    """Turn the options into a :class:`PreparedRun`, checking every input before the engine is
    launched or asked anything: the spec with its mode and flags, the API key, the
    accuracy suite (every line), the token counter, the trace file, the run's options
    (label, role, mode, output and input files) and the launch options. A bad suite line
    found after the last window would cost the whole run.

    Reports the effective spec (when flags built or changed it) and the mode's lines.

    Raises:
        SpecError, InputError: the first input that is refused (nothing is written).
    """
    raw, spec = run_spec(opts)
    spec = apply_engine_cmd(pin_dataset(spec, opts.spec_path), opts.engine_cmd)
    overrides = mode_overrides(raw, spec)
    if opts.point is not None and opts.point.any_given:
        # What the flags made of the spec, before anything is sent: the record stores it.
        unused = not_applying(spec, accuracy=opts.accuracy)
        reporter.line("effective spec:\n" + spec_yaml(spec, unused))
    api_key = read_api_key(spec, str(opts.spec_path), opts.environ)
    suite = suite_path(spec, opts.spec_path) if opts.accuracy else None
    if suite is not None and not suite.is_file():
        raise InputError([Problem(str(opts.spec_path), "accuracy.suite", f"no such file: {suite}")])
    try:
        loaded_suite = read_suite(suite) if suite is not None else None
    except InputError as exc:
        raise named_by(str(opts.spec_path), "accuracy.suite", exc) from None
    counter = load_token_counter(spec, opts.spec_path)
    check_trace_file(spec, opts.spec_path)
    check_run_options(
        label=opts.label,
        role=opts.role,
        mode=opts.mode,
        out=opts.out,
        spec_path=opts.spec_path,
        suite=suite,
        engine_log=opts.engine_log,
    )
    for line in mode_lines(spec, opts.mode, overrides, accuracy=suite is not None):
        reporter.line(line)
    check_launch_options(spec, opts.engine_log)
    return PreparedRun(opts, spec, tuple(overrides), api_key, loaded_suite, counter)


def execute(plan: PreparedRun, reporter: Reporter, stop: GracefulStop) -> RunRecord:
    """Measure a prepared run: take the output's lock, launch the engine when the spec
    says so, probe it, refuse a served model or workload that does not fit (still before
    the first request), then the windows, MBU and accuracy (:func:`_measure`).

    Raises:
        EngineError, InputError, StopSignal, KeyboardInterrupt: as :func:`measure_configuration`.
    """
    opts = plan.opts
    with (
        exclusive_lock(opts.out, what="tokenwatt collect"),
        launched_engine(plan.spec, opts.out, plan.api_key) as engine,
    ):
        rec, stream, info = _start_record(plan, engine, reporter)
        # The launched engine's process group: its GPUs by the processes on them.
        pgid = engine.pgid if engine is not None else None
        _instrumented(plan, rec, stream, info, reporter, stop, engine_pgid=pgid)
    return rec


def _start_record(
    plan: PreparedRun, engine: LaunchedEngine | None, reporter: Reporter
) -> tuple[RunRecord, WorkloadStream, EngineInfo]:
    """The engine probed and checked, the run's request stream, and the record as it
    stands before the first window."""
    opts, api_key = plan.opts, plan.api_key
    spec = engine.spec_for(plan.spec) if engine is not None else plan.spec
    engine_log = engine.plan.log_path if engine is not None else opts.engine_log
    secrets = run_secrets(api_key, spec)
    warnings = scan_engine_log(engine_log, secrets) if engine_log is not None else []
    info = probe_engine(spec.engine.endpoint, api_key, proxy=spec.engine.proxy)
    if opts.point is not None and opts.point.any_given:
        reporter.line(reported_engine_line(info.engine_name, info.engine_version))
    # Everything that can refuse the run does so before the first request.
    served_warnings = check_served_model(spec, info, opts.spec_path)
    from_flags = opts.spec_path == FLAGS_SPEC
    spec, taken = model_from_server(spec, info, stated=_vocab_stated(opts), from_flags=from_flags)
    for line in taken:
        reporter.line(line)
    stream = workload_for(
        spec,
        base_dir=opts.spec_path.parent,
        context_length=info.max_model_len,
        count_tokens=plan.count_tokens,
        spec_file=opts.spec_path,
    )
    fit_notes = check_workload_fits(
        spec, stream, info, opts.spec_path, count_tokens=plan.count_tokens
    )
    check_vocab_fits(spec, stream, info, _vocab_field(opts))
    rec = new_record(opts, spec)
    rec.mode_overrides = list(plan.overrides)
    rec.engine_warnings = warnings + served_warnings
    if engine is not None:
        track_engine(engine, rec, lambda: write_record(rec, opts.out, secrets), served_warnings)
    rec.not_covered += fit_notes
    rec.simulated = spec.hardware.adapter == "sim" or _is_sim_engine(info)
    return rec, stream, info


def run_secrets(api_key: str | None, spec: Spec) -> list[str]:
    """The values no record or message of the run may hold: the API key and the password
    of a proxy the run's requests go through (:attr:`tokenwatt.netpath.NetworkPath.secrets`)."""
    path = network_path(api_base_url(spec.engine.endpoint), spec.engine.proxy)
    return ([api_key] if api_key else []) + path.secrets


def _vocab_stated(opts: CollectOptions) -> bool:
    """Whether someone stated ``model.vocab_size``: a spec file, or ``--vocab-size``."""
    flag = opts.point is not None and opts.point.vocab_size is not None
    return flag or opts.spec_path != FLAGS_SPEC


def _vocab_field(opts: CollectOptions) -> tuple[str, str]:
    """Where a wrong vocabulary size came from: the flag, or the spec file's field."""
    if opts.point is not None and opts.point.vocab_size is not None:
        return "--vocab-size", ""
    return str(opts.spec_path), "model.vocab_size"


def _is_sim_engine(info: EngineInfo) -> bool:
    """Whether the engine reports itself as ``tokenwatt sim``."""
    return (info.engine_version or "").startswith(SIM_VERSION.split()[0])


def _instrumented(
    plan: PreparedRun,
    rec: RunRecord,
    stream: WorkloadStream,
    info: EngineInfo,
    reporter: Reporter,
    stop: GracefulStop,
    *,
    engine_pgid: int | None = None,
) -> None:
    """The power meter, the load generator's workers and the instruments, opened once for
    the run, around :func:`_measure`."""
    spec, api_key = rec.spec, plan.api_key
    meter = _open_meter(spec, rec, reporter, engine_pgid)
    workers = closed_loop_workers(spec, resolve_workers(spec, stream))
    if spec.measurement.workers == "auto" and spec.measurement.ray_address is None:
        reporter.line(_auto_workers_line(workers, spec))
    # Started once for the run, before the idle check and the first window.
    pool = pool_for(spec, workers) or contextlib.nullcontext()
    with (
        pool as worker_pool,
        Instruments(
            spec.engine.endpoint, api_key=api_key, meter=meter, proxy=spec.engine.proxy
        ) as instruments,
    ):
        rec.environment = environment_from(info, meter, spec)
        if _is_sim_engine(info):
            # It speaks vLLM's metric names, but it is the simulator.
            rec.environment.engine_name = SIM_VERSION.split()[0]
        runner = WindowRunner(
            spec,
            api_key=api_key,
            workload=stream,  # one stream: every window draws fresh requests from it
            instruments=instruments,
            progress=reporter,
            engine_name=info.engine_name,
            count_tokens=plan.count_tokens,
            stop=stop,
            pool=worker_pool,
        )
        _measure(plan.opts, rec, runner, plan.suite, stream)


def _auto_workers_line(workers: int, spec: Spec) -> str:
    """What ``--workers auto`` chose, said once before the first window (each window's
    ``workers`` keeps it too)."""
    why = (
        "the closed loop runs in one process"
        if spec.measurement.profile == "concurrency"
        else f"from {usable_cores()} usable cores and the expected chunk rate"
    )
    noun = "process" if workers == 1 else "processes"
    return f"workers: auto chose {workers} load-generator {noun} ({why})"


def _open_meter(
    spec: Spec, rec: RunRecord, reporter: Reporter, engine_pgid: int | None
) -> PowerMeter | None:
    """The spec's power meter, or None (noted in ``rec.not_covered``; a meter the spec asks
    for that cannot be opened is also reported as a warning before the first window, so
    the run is not mistaken for one that measures energy)."""
    if spec.power.source == "none":
        rec.not_covered.append("Power: no power source configured (power.source: none)")
        return None
    from tokenwatt.telemetry import open_meter

    try:
        return open_meter(spec, sim_endpoint=spec.engine.endpoint, engine_pgid=engine_pgid)
    except TelemetryError as exc:
        note = f"{METER_NOT_OPENED} ({exc})"
        rec.not_covered.append(note)
        reporter.warning(f"{note}; this run measures no power or energy")
        return None


def _measure(
    opts: CollectOptions,
    rec: RunRecord,
    runner: WindowRunner,
    suite: LoadedSuite | None,
    stream: WorkloadStream,
) -> None:
    """Everything after the set-up: search, repeats, MBU, accuracy; the record is written
    however it ends (Ctrl-C, SIGTERM/SIGHUP and a dead engine leave it ``complete: false``).
    """
    spec = rec.spec
    api_key = runner.config.api_key
    progress = runner.progress
    secrets = run_secrets(api_key, spec)

    def checkpoint() -> None:
        write_record(rec, opts.out, secrets)

    measurement = Measurement(
        rec,
        runner,
        SearchSetup.for_run(spec, fast=opts.fast_search),
        checkpoint=checkpoint,
        check_engine=lambda: _check_engine(spec.engine.endpoint, api_key, spec.engine.proxy),
    )
    measurement.request_log = RequestLogWriter(log_path(opts.out))
    try:
        checkpoint()
        with progress:
            if spec.power.idle_s:
                progress.begin("idle power")
                rec.idle_power = runner.idle_power(spec.power.idle_s)
                checkpoint()
            measurement.run()
            rec.mbu, note = mbu_for(spec, rec)
            if note:
                rec.not_covered.append(note)
            if suite is not None:
                progress.begin("accuracy suite")
                rec.accuracy = run_suite(
                    spec,
                    spec.engine.endpoint,
                    api_key,
                    suite,
                    limit=spec.accuracy.limit,
                    seeds=spec.accuracy.seeds,
                )
        rec.complete = True
        rec.incomplete_reason = None
    except StopSignal as exc:
        runner.stop.settle()
        rec.interrupted = "sigterm" if exc.name == "SIGTERM" else "sighup"
        rec.incomplete_reason = (
            f"stopped by {exc.name}; everything measured so far is kept (the window in "
            "flight, if any, is marked partial)"
        )
    except KeyboardInterrupt:
        runner.stop.settle()
        rec.interrupted = "ctrl-c"
        # Ctrl-C stops at once (collect/measure/stopping.py): the window in flight is not
        # kept, and the record must not say that everything was.
        rec.incomplete_reason = (
            "interrupted (Ctrl-C); the windows measured before it are kept, the window in "
            "flight, if any, is not (SIGTERM keeps it, marked partial)"
        )
    except EngineDiedError as exc:
        rec.interrupted = "engine-died"
        rec.incomplete_reason = str(exc)
    except BaseException as exc:
        # Whatever else ends the run (a bug, memory, a library's error) is raised on, but
        # the record says so instead of staying "in progress".
        rec.incomplete_reason = failure_reason(exc, secrets=secrets)
        raise
    finally:
        rec.finished = dt.datetime.now(dt.UTC)
        rec.prompts = PromptStats(
            **stream.counts(), notes=stream.notes(), dataset=stream.dataset_stats()
        )
        checkpoint()


def _check_engine(endpoint: str, api_key: str | None, proxy: ProxyChoice) -> None:
    """After a window where nothing succeeded: is the engine still there?

    Raises:
        EngineDiedError: it does not answer ``/v1/models``.
    """
    try:
        probe_engine(endpoint, api_key, timeout_s=5.0, proxy=proxy)
    except EngineError as exc:
        raise EngineDiedError(f"the engine stopped answering: {exc}") from exc
