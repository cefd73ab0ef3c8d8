"""The command line: parses arguments, calls one typed function per command, prints.

This is the only module that imports every stage; each command imports its stage lazily so
that ``tokenwatt --help`` stays instant. Library errors become exit codes here and only here:
:class:`~tokenwatt.errors.InputError` exits 2, any other TokenwattError exits 1.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from tokenwatt import __version__
from tokenwatt.cli_collect import point_inputs, point_options
from tokenwatt.cli_exits import errors_to_exit
from tokenwatt.errors import InputError

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tokenwatt")
def cli() -> None:
    """TokenWatt Bench: SLO goodput, tokens per joule, MBU and an accuracy gate."""


@cli.command()
@click.option(
    "--reports",
    "reports_dir",
    type=click.Path(path_type=Path),
    default=Path("reports"),
    show_default=True,
    help="Folder of report records.",
)
@click.option(
    "--out",
    "docs_dir",
    type=click.Path(path_type=Path),
    default=Path("docs"),
    show_default=True,
    help="MkDocs docs folder to write (generated, git-ignored).",
)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when the pages are stale.")
@errors_to_exit
def build(reports_dir: Path, docs_dir: Path, check: bool) -> None:
    """Validate report records and write the lab-notes site's pages."""
    from tokenwatt.site import build_site

    result = build_site(reports_dir, docs_dir, check=check)
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(result.summary)


def _collect_options(func: F) -> F:
    """The options shared by ``collect`` and its alias ``run``."""
    options = [
        click.option(
            "--spec",
            "spec_path",
            type=click.Path(path_type=Path),
            default=None,
            help="Benchmark spec (specs/*.spec.yaml); without it, one is built from "
            "--endpoint, --model and the load flags.",
        ),
        click.option(
            "--label", default=None, help="Configuration name, e.g. vllm-fp8kv (default: --model)."
        ),
        click.option(
            "--role",
            type=click.Choice(["baseline", "tuned"]),
            default=None,
            help="Its role (default without --spec: baseline).",
        ),
        click.option(
            "--out",
            type=click.Path(path_type=Path, dir_okay=False),
            required=True,
            help=(
                "Run record to write (runs/X.json), atomically. Checked before measuring: "
                "never the spec, suite or engine log; an existing file is replaced only "
                "when it is a run record."
            ),
        ),
        click.option(
            "--mode",
            type=click.Choice(["smoke", "quick", "full"]),
            default="quick",
            show_default=True,
            help="Preset of windows, repeats and accuracy sample (smoke: never reported).",
        ),
        click.option(
            "--engine-log",
            type=click.Path(path_type=Path),
            default=None,
            help="Engine log to scan for known warnings (e.g. uncalibrated KV scales).",
        ),
        click.option("--endpoint", default=None, help="Overrides the spec's engine.endpoint."),
        click.option(
            "--engine-cmd",
            default=None,
            metavar="'CMD ARGS'",
            help="Start the engine with this command (no shell; {port}: a free port the "
            "endpoint then uses), wait until it answers, measure, stop it. Its log goes "
            "beside --out (X.engine.log). Overrides engine.launch.cmd.",
        ),
        click.option(
            "--kv-dtype",
            type=click.Choice(["auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2"]),
            default=None,
            help="Overrides the spec's model.kv_dtype for this configuration "
            "(per configuration, outside the fingerprint).",
        ),
        click.option("--no-accuracy", is_flag=True, help="Skip the accuracy suite."),
        click.option("--no-progress", is_flag=True, help="No live display on stderr."),
        click.option(
            "--fast-search",
            is_flag=True,
            help="Cheaper SLO search (short warm-ups after a pass, scout windows, bisect to 5%).",
        ),
        click.option(
            "--workers",
            default=None,
            metavar="N|auto",
            help="Load-generator processes sharing each window's one Poisson schedule "
            "(overrides measurement.workers; default 1: one process). 'auto': from the CPU "
            "cores and the expected chunk rate, never more than the cores less one.",
        ),
        click.option(
            "--ray-address",
            default=None,
            metavar="ADDR",
            help="Run the load-generator workers as Ray actors on this existing Ray cluster "
            "(HOST:6379, ray://HOST:10001 or auto; needs the [ray] extra): one per node, or "
            "--workers N spread over the nodes; each actor's clock offset is measured and "
            "corrected before every window. Overrides measurement.ray_address.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return point_options(func)


def _collect(
    spec_path: Path | None,
    label: str | None,
    role: str | None,
    out: Path,
    mode: str,
    engine_log: Path | None,
    endpoint: str | None,
    kv_dtype: str | None,
    no_accuracy: bool,
    no_progress: bool,
    fast_search: bool,
    workers: str | None,
    ray_address: str | None = None,
    engine_cmd: str | None = None,
    **point: Any,
) -> None:
    import shlex

    from tokenwatt.analysis import explain_run, gpu_minutes, run_doubt
    from tokenwatt.collect import CollectOptions, StopSignal, collect, exit_status
    from tokenwatt.redact import scrub

    spec_path, label, role, flags = point_inputs(spec_path, label, role, point)
    opts = CollectOptions(
        point=flags,
        spec_path=spec_path,
        label=label,
        role=role,  # type: ignore[arg-type]
        out=out,
        mode=mode,  # type: ignore[arg-type]
        engine_log=engine_log,
        endpoint=endpoint,
        kv_dtype=kv_dtype,
        accuracy=not no_accuracy,
        command=scrub(shlex.join(["tokenwatt", *sys.argv[1:]])),
        progress=not no_progress,
        fast_search=fast_search,
        workers=workers,
        ray_address=ray_address,
        engine_cmd=engine_cmd,
    )
    try:
        record = collect(opts)
    except StopSignal as exc:  # before the first window: nothing was measured
        click.echo(f"stopped by {exc.name} before the first window; no record written", err=True)
        sys.exit(exit_status(exc.name))
    except KeyboardInterrupt:
        click.echo("interrupted (Ctrl-C) before the first window; no record written", err=True)
        sys.exit(130)
    _print_run_table(record)
    r = record.result
    if r is not None:
        load = f"{r.rate_rps:.4g} req/s"
        if r.concurrency is not None:
            load = f"{r.concurrency} clients ({load})"
        windows = "windows" if record.spec.sweep.fixed else "repeats"
        click.echo(
            f"{record.label}: {load}, goodput {r.goodput_tok_s:,.1f} tok/s "
            f"({r.slo_pass_count}/{r.repeats} {windows} met the SLO; "
            f"{gpu_minutes(r.gpu_seconds)} GPU-min, "
            f"{gpu_minutes(r.gpu_seconds_saved)} saved by early stops)"
        )
        for warning in r.warnings:
            click.echo(f"warning: {warning}", err=True)
    click.echo(explain_run(record))
    doubt = run_doubt(record)
    if doubt:
        click.echo(doubt)
    if record.accuracy is not None:
        click.echo(f"accuracy: {record.accuracy.score_pct:.1f}% ({record.accuracy.name})")
    if record.simulated:
        click.echo("note: simulated engine; these numbers are not measurements", err=True)
    click.echo(f"wrote {out}")
    if not record.complete:
        click.echo(f"incomplete: {record.incomplete_reason}", err=True)
        # The shell's status for a process ended by that signal: 128 + its number.
        signals = {"ctrl-c": "SIGINT", "sigterm": "SIGTERM", "sighup": "SIGHUP"}
        name = signals.get(record.interrupted or "")
        sys.exit(exit_status(name) if name else 1)


def _print_run_table(record: Any) -> None:
    """The run's windows as a table on stdout (:mod:`tokenwatt.terminal`)."""
    from rich.console import Console

    from tokenwatt.terminal import run_table

    Console(soft_wrap=False).print(run_table(record))


@cli.command()
@click.argument("run_file", metavar="RUN.json", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option(
    "--requests",
    "with_requests",
    is_flag=True,
    help="Also the per-window TTFT/TPOT/E2E distributions from the per-request file "
    "beside the record, checked against the SHA-256 the record keeps.",
)
@errors_to_exit
def show(run_file: Path, as_json: bool, with_requests: bool) -> None:
    """Print a run record's windows: rate, errors, latency percentiles, tok/s, verdict."""
    import json

    from rich.console import Console

    from tokenwatt.analysis import run_json
    from tokenwatt.terminal import plain, print_run, requests_table, show_run

    record, windows = show_run(run_file, with_requests=with_requests)
    if as_json:
        data = run_json(record)
        if windows is not None:
            data["requests"] = windows
        click.echo(json.dumps(data, indent=2))
        return
    console = Console(soft_wrap=False)
    print_run(record, console)
    if windows is not None:
        log = record.requests_log
        assert log is not None
        title = f"per-request file {log.file} (SHA-256 checked, {log.requests} requests)"
        console.print(requests_table(title, windows))
        console.print(plain("failed requests count as infinite; cancelled and warm-up ones not"))


@cli.command()
@_collect_options
@errors_to_exit
def collect(**kwargs: Any) -> None:
    """Measure a configuration (SLO search, repeats, power, MBU, accuracy) into a run record."""
    _collect(**kwargs)


@cli.command("run")
@_collect_options
@errors_to_exit
def run_command(**kwargs: Any) -> None:
    """Same as ``collect``."""
    _collect(**kwargs)


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8000,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port (0: a free one).",
)
@click.option(
    "--profile",
    default="bf16-kv",
    show_default=True,
    help="Simulated configuration: bf16-kv, or fp8-kv (twice the KV cache, slower steps).",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of its behaviour.")
@click.option("--model", default="tokenwatt-sim", show_default=True, help="Model name served.")
@click.option(
    "--accuracy-suite",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="JSON Lines suite whose prompts it answers (right with probability --accuracy-p).",
)
@click.option("--accuracy-p", default=0.96, show_default=True, type=float)
@click.option(
    "--time-scale",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0.01, max=1000.0),
    help="Multiply every step time (2: same behaviour at half the rates, half the CPU).",
)
@errors_to_exit
def sim(
    host: str,
    port: int,
    profile: str,
    seed: int,
    model: str,
    accuracy_suite: Path | None,
    accuracy_p: float,
    time_scale: float,
) -> None:
    """Serve a simulated engine (OpenAI-compatible API, /metrics) for trying the pipeline."""
    from tokenwatt import sim as simulator

    server = simulator.make_server(
        profile,
        seed=seed,
        model=model,
        accuracy_suite=accuracy_suite,
        accuracy_p=accuracy_p,
        time_scale=time_scale,
    )
    simulator.serve(server, host, port)


@cli.group()
def suites() -> None:
    """Accuracy suites: fetch GSM8K and build a seeded 5-shot suite file."""


@suites.command("fetch")
@click.argument("name", type=click.Choice(["gsm8k"]))
@click.option(
    "--dest",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("data/gsm8k"),
    show_default=True,
    help="Folder to download test.jsonl and train.jsonl into.",
)
@click.option(
    "--base-url",
    default=None,
    help="A mirror of grade_school_math/data (files are checked against the same pinned SHA-256).",
)
@errors_to_exit
def suites_fetch(name: str, dest: Path, base_url: str | None) -> None:
    """Download a suite's source files, verified against pinned SHA-256 hashes."""
    from tokenwatt.collect import GSM8K_BASE_URL, fetch_gsm8k

    for got in fetch_gsm8k(dest, base_url=base_url or GSM8K_BASE_URL):
        how = "already present" if got.already_present else "downloaded"
        click.echo(f"{got.path}: {how}, SHA-256 {got.sha256} verified")


@suites.command("build")
@click.argument("name", type=click.Choice(["gsm8k"]))
@click.option(
    "--test",
    "test_path",
    type=click.Path(path_type=Path),
    required=True,
    help="GSM8K test split (JSON Lines).",
)
@click.option(
    "--train",
    "train_path",
    type=click.Path(path_type=Path),
    required=True,
    help="GSM8K train split (JSON Lines); five exemplars are drawn from it.",
)
@click.option("--n", "n", type=int, default=200, show_default=True, help="Items to sample.")
@click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed.")
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Suite file to write.")
@errors_to_exit
def suites_build(
    name: str, test_path: Path, train_path: Path, n: int, seed: int, out: Path
) -> None:
    """Build a seeded 5-shot suite file (JSON Lines: id, question, prompt, gold)."""
    from tokenwatt.collect import build_suite_file

    built = build_suite_file(test_path, train_path, n, seed, out)
    click.echo(
        f"{built.path}: {built.items} items, SHA-256 {built.sha256} "
        f"(test {built.test_sha256[:12]}, train {built.train_sha256[:12]}, seed {seed})"
    )


@cli.command()
@click.argument("run_files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--title", required=True, help="The lab note's title.")
@click.option("--id", "report_id", help="Report id (default: from the title).")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Report file to write (default: reports/ID.json).",
)
@click.option(
    "--cards", type=click.IntRange(min=1), default=64, show_default=True, help="fleet.cards."
)
@click.option("--demo", is_flag=True, help="Allow smoke-mode and simulated runs (a demo report).")
@click.option("--force", is_flag=True, help="Replace the report file if it exists.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@errors_to_exit
def report(
    run_files: tuple[Path, ...],
    title: str,
    report_id: str | None,
    out: Path | None,
    cards: int,
    demo: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Summarise run records (one per configuration) into a report record.

    Prints the configurations (goodput, tokens/J, accuracy verdict, capacity credit) as a
    table, the capacity conclusion and, per configuration, the sentence that says why its
    result rate is where it is; ``--json`` prints the same as JSON.
    """
    from pydantic import ValidationError

    from tokenwatt import analysis
    from tokenwatt.analysis import report_command, slug
    from tokenwatt.errors import Problem
    from tokenwatt.records import problems_from
    from tokenwatt.records_io import load_runs, write_report

    runs = load_runs(list(run_files))
    command = report_command(
        [r.name for r in runs],
        title=title,
        report_id=report_id,
        out=out.as_posix() if out is not None else None,
        cards=cards if cards != 64 else None,
        demo=demo,
    )
    try:
        record = analysis.summarise(
            runs, title=title, report_id=report_id, cards=cards, demo=demo, command=command
        )
    except ValidationError as exc:  # from the options (--title, --id) the record carries
        problems = [Problem("<command line>", p.field, p.message) for p in problems_from("", exc)]
        raise InputError(problems) from None
    target = out if out is not None else Path("reports") / f"{report_id or slug(title)}.json"
    write_report(record, target, force=force, inputs=list(run_files))
    _print_report(record, target, [item.run for item in runs], as_json=as_json)


def _print_report(record: Any, target: Path, runs: list[Any], *, as_json: bool) -> None:
    """What ``report`` prints (:func:`tokenwatt.terminal.report_output`): JSON, or tables
    and sentences; the band warning goes to stderr either way."""
    import json

    from rich.console import Console

    from tokenwatt.terminal import print_report, report_output

    summary = report_output(record, target, runs)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        print_report(summary, Console(soft_wrap=False))
    if summary["band_warning"]:
        click.echo(f"warning: {summary['band_warning']}", err=True)


@cli.command()
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("schemas"),
    show_default=True,
    help="Folder for report, run, spec and session .schema.json files.",
)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when the files are stale.")
@errors_to_exit
def schema(out_dir: Path, check: bool) -> None:
    """Export the JSON Schema of every record (report, run, spec, session file)."""
    from tokenwatt.records_io import export_schemas

    result = export_schemas(out_dir, check=check)
    for path in result.written:
        click.echo(f"wrote {path}")
    if check or not result.written:
        click.echo(f"{len(result.current)} schema files are current in {out_dir}")


class _FiniteFloat(click.FloatRange):
    """A float in a range that is also finite: ``nan`` passes click's range check."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number != number:
            self.fail(f"{value!r} is not a number.", param, ctx)
        return number


_WEIGHT_DTYPES = (
    "bf16",
    "fp16",
    "fp32",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "int8",
    "int4",
    "awq",
    "gptq",
)
_KV_DTYPES = ("bf16", "fp16", "fp32", "fp8", "fp8_e4m3", "fp8_e5m2")


@cli.command("model-info")
@click.argument("config_path", metavar="CONFIG.json", type=click.Path(path_type=Path))
@click.option(
    "--weight-dtype",
    type=click.Choice(_WEIGHT_DTYPES),
    default=None,
    help="Weight dtype [default: from the config's quantization_config/torch_dtype, else bf16].",
)
@click.option(
    "--kv-dtype",
    type=click.Choice(_KV_DTYPES),
    default="bf16",
    show_default=True,
    help="KV-cache dtype.",
)
@click.option(
    "--kv-cache-gib",
    type=_FiniteFloat(min=0, max=1e6),
    default=None,
    help="KV-cache size (GiB, as vLLM logs it) to turn into a capacity in tokens.",
)
@click.option(
    "--batch",
    type=_FiniteFloat(min=0, max=1e7),
    default=None,
    help="Running batch: weights read per decode step (MoE: expected distinct experts).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@errors_to_exit
def model_info_cmd(
    config_path: Path,
    weight_dtype: str | None,
    kv_dtype: str,
    kv_cache_gib: float | None,
    batch: float | None,
    as_json: bool,
) -> None:
    """Geometry, parameters, weight bytes, KV bytes per token and KV capacity of a model."""
    import json

    from tokenwatt import analysis
    from tokenwatt.records import read_json

    config = read_json(config_path, InputError)
    info = analysis.model_info(
        config,
        str(config_path),
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        kv_cache_gib=kv_cache_gib,
        batch=batch,
    )
    if as_json:
        click.echo(json.dumps(info.as_dict(), indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="model-info", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    for label, value in analysis.info_rows(info):
        table.add_row(label, value)
    Console().print(table)


from tokenwatt.cli_init import init_command  # noqa: E402 (registered after cli exists)

cli.add_command(init_command)

from tokenwatt.cli_session import session_command  # noqa: E402 (registered on the group)

cli.add_command(session_command)

from tokenwatt.cli_cloud import cloud_group  # noqa: E402 (registered on the group)

cli.add_command(cloud_group)


def main() -> None:
    """Entry point of the ``tokenwatt`` console script."""
    cli()
