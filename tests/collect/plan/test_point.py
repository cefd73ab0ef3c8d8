"""Point-and-shoot flags: the spec they build, their overrides of a spec, and bad combinations.

Every CLI case points ``--endpoint`` at a closed port: a check that came after the engine
probe would exit 1 ("cannot reach the engine"), not 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tokenwatt.cli import cli
from tokenwatt.collect.plan.modes import apply_mode
from tokenwatt.collect.plan.point import PointFlags, override_spec, point_spec
from tokenwatt.collect.plan.runfile import adjust_run_spec
from tokenwatt.errors import InputError
from tokenwatt.records import Spec, load_spec, unstated_fields, validate
from tokenwatt.records.spec.spec import fingerprint, fingerprint_fields

REPO = Path(__file__).resolve().parents[3]
CLOSED = "http://127.0.0.1:9"
FLAGS = PointFlags(model="m", rates=(2.0, 4.0), input_tokens=64, output_tokens=8, duration_s=5.0)


def test_flags_build_a_spec_with_their_values() -> None:
    spec = point_spec(FLAGS, "http://127.0.0.1:8000/v1")
    assert spec.engine.model == spec.model.name == "m"
    assert spec.workload.input_tokens is not None and spec.workload.output_tokens is not None
    assert (spec.workload.input_tokens.median, spec.workload.input_tokens.p90) == (64, 64)
    assert (spec.workload.output_tokens.median, spec.workload.output_tokens.p90) == (8, 8)
    assert spec.measurement.window_s == spec.measurement.search_window_s == 5.0
    assert spec.sweep.fixed and spec.sweep.rates == [2.0, 4.0]
    assert spec.measurement.profile == "poisson"
    assert (spec.slo.ttft_p99_ms, spec.slo.tpot_p99_ms) == (450.0, 40.0)
    # Hardware not stated, never guessed.
    assert spec.hardware.adapter == "none" and spec.hardware.rated_bw_tbs_per_gpu is None
    assert spec.power.source == "none"
    # The same flags give the same fingerprint; another load flag, another spec.
    again = point_spec(FLAGS, "http://127.0.0.1:8000/v1")
    assert fingerprint(again) == fingerprint(spec)
    closed = point_spec(PointFlags(model="m", concurrencies=(2, 4)), "http://h:1/v1")
    assert closed.measurement.profile == "concurrency" and closed.sweep.concurrencies == [2, 4]
    assert fingerprint_fields(closed)["measurement.profile"] == "concurrency"


def test_default_profile_leaves_old_fingerprints_unchanged() -> None:
    spec = load_spec(REPO / "specs" / "sim-demo.spec.yaml")
    assert "measurement.profile" not in fingerprint_fields(spec)
    constant = spec.model_copy(
        update={"measurement": spec.measurement.model_copy(update={"profile": "constant"})}
    )
    assert fingerprint_fields(constant)["measurement.profile"] == "constant"
    assert fingerprint(constant) != fingerprint(spec)


def test_flags_override_a_spec() -> None:
    spec = load_spec(REPO / "specs" / "sim-demo.spec.yaml")
    out = override_spec(spec, PointFlags(concurrencies=(3,), output_tokens=32, warmup_s=0.5))
    assert out.measurement.profile == "concurrency" and out.sweep.fixed
    assert out.sweep.concurrencies == [3] and out.measurement.warmup_s == 0.5
    assert out.workload.output_tokens is not None and out.workload.output_tokens.median == 32
    # Unset flags leave the spec alone.
    assert out.workload.input_tokens == spec.workload.input_tokens
    assert out.engine == spec.engine and out.slo == spec.slo
    searched = override_spec(out, PointFlags(sweep=True))
    assert not searched.sweep.fixed


def test_closed_loop_beyond_the_client_cap_is_refused() -> None:
    spec = load_spec(REPO / "specs" / "sim-demo.spec.yaml")  # max_concurrency 512
    data = spec.model_dump()
    data["measurement"]["profile"] = "concurrency"
    data["sweep"]["start_concurrency"] = 600
    with pytest.raises(ValueError, match=r"600 clients exceed measurement\.max_concurrency"):
        type(spec).model_validate(data)
    # A closed-loop search needs no list; fixed closed-loop windows do.
    searched = override_spec(spec, PointFlags(profile="concurrency"))
    assert searched.measurement.profile == "concurrency" and not searched.sweep.fixed
    with pytest.raises(InputError, match=r"sweep\.concurrencies must be given"):
        override_spec(
            spec.model_copy(update={"sweep": spec.sweep.model_copy(update={"fixed": True})}),
            PointFlags(profile="concurrency"),
        )


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["collect", "--no-progress", *args])
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--rate", "1", "--rates", "1,2"], "--rates"),
        (["--rate", "1", "--sweep"], "--sweep"),
        (["--rates", "1,2", "--concurrency", "4"], "--concurrency"),
        (["--concurrency", "4", "--profile", "constant"], "--profile"),
        (["--rate", "3", "--profile", "concurrency"], "--profile"),
        (["--rates", "2,1"], "--rates"),
        (["--rates", "1,x"], "--rates"),
        (["--concurrency", "2.5"], "--concurrency"),
        ([], "--rate"),
        (["--concurrency", "4", "--workers", "2"], "--workers"),
    ],
)
def test_bad_flag_combinations_exit_2_naming_the_flag(
    tmp_path: Path, args: list[str], named: str
) -> None:
    out = tmp_path / "run.json"
    code, output = _invoke("--endpoint", CLOSED, "--model", "m", "--out", str(out), *args)
    assert code == 2, output
    assert f"{named}: " in output
    assert "cannot reach the engine" not in output and "Traceback" not in output
    assert not out.exists()


def test_without_spec_model_and_endpoint_are_needed(tmp_path: Path) -> None:
    out = str(tmp_path / "run.json")
    code, output = _invoke("--endpoint", CLOSED, "--rate", "1", "--out", out)
    assert code == 2 and "--spec: give --spec, or --endpoint and --model" in output
    code, output = _invoke("--model", "m", "--rate", "1", "--out", out)
    assert code == 2 and "--endpoint: is needed without --spec" in output


def test_with_spec_label_and_role_are_still_needed(tmp_path: Path) -> None:
    spec = str(REPO / "specs" / "sim-demo.spec.yaml")
    out = str(tmp_path / "run.json")
    code, output = _invoke("--spec", spec, "--role", "baseline", "--out", out, "--rate", "1")
    assert code == 2 and "--label: is needed with --spec" in output


def test_effective_spec_is_the_mode_capped_flag_spec() -> None:
    spec = apply_mode(point_spec(FLAGS, "http://127.0.0.1:8000/v1"), "smoke")
    assert spec.measurement.warmup_s == 5.0 and spec.measurement.window_s == 5.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--concurrency", "100000000"],
            "--concurrency: 100000000 clients is more than one load generator holds; "
            "the largest accepted is 10,000",
        ),
        (
            # 1 s window + 0 s warm-up + 120 s request timeout: 10,000,000 / 121 req/s.
            ["--rate", "1e9"],
            "--rate/--rates: 1e+09 req/s over 121 s (warm-up + window + request timeout) "
            "would schedule more than 10,000,000 arrivals; the largest rate accepted with "
            "these lengths is 82644.6 req/s",
        ),
        (
            ["--rate", "1", "--workers", "100000"],
            "--workers: must be a whole number from 1 to 256 (the largest accepted), or "
            "auto; got '100000'",
        ),
    ],
)
def test_loads_past_the_ceilings_exit_2_naming_the_flag_and_the_largest(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "run.json"
    code, output = _invoke(
        "--endpoint", CLOSED, "--model", "m", "--duration", "1", "--warmup", "0",
        "--out", str(out), *args,
    )  # fmt: skip
    assert code == 2, output
    assert message in " ".join(output.split())
    assert "Traceback" not in output and "cannot reach the engine" not in output
    assert not out.exists()


def test_the_largest_accepted_loads_still_make_a_spec() -> None:
    flags = PointFlags(model="m", concurrencies=(10_000,), duration_s=1.0, warmup_s=0.0)
    assert point_spec(flags, CLOSED).measurement.max_concurrency == 10_000
    rate = PointFlags(model="m", rates=(82644.0,), duration_s=1.0, warmup_s=0.0)
    assert point_spec(rate, CLOSED).sweep.rates == [82644.0]


def test_spec_files_past_the_ceilings_are_refused_naming_the_field() -> None:
    spec = load_spec(REPO / "specs" / "sim-demo.spec.yaml")
    data = spec.model_dump()
    lengths = {"warmup_s": 10.0, "window_s": 60.0, "search_window_s": 30.0}
    data["measurement"].update(lengths, request_timeout_s=60.0)  # 130 s in all

    def problems(section: str, **changes: object) -> list[str]:
        changed = {**data, section: {**data[section], **changes}}
        with pytest.raises(InputError) as caught:
            validate(Spec, changed, "s.yaml", InputError)
        return [f"{p.field}: {p.message}" for p in caught.value.problems]

    assert problems("measurement", max_concurrency=10_001) == [
        "measurement.max_concurrency: must be less than or equal to 10000, got 10001"
    ]
    assert "less than or equal to 256 or 'auto', got 257" in problems("measurement", workers=257)[0]
    assert problems("sweep", max_rps=80_000.0) == [
        "sweep.max_rps: 80000 req/s over warm-up + window + request timeout would schedule "
        "more than 10,000,000 arrivals in one window; the largest rate accepted with these "
        "measurement lengths is 76923.1 req/s"
    ]


@pytest.mark.parametrize("with_spec", [False, True])
def test_collect_refuses_credentials_in_endpoint_naming_the_flag(
    tmp_path: Path, with_spec: bool
) -> None:
    out = tmp_path / "run.json"
    spec = ["--spec", str(REPO / "specs" / "sim-demo.spec.yaml"), "--label", "a", "--role", "tuned"]
    code, output = _invoke(
        *(spec if with_spec else ["--model", "m", "--rate", "1"]),
        "--endpoint", "http://user:pw-SECRET@127.0.0.1:9/v1", "--out", str(out),
    )  # fmt: skip
    assert code == 2, output
    assert output == (
        "error: --endpoint: must not carry a user name or password (user:password@host): "
        "records keep this URL; give secrets through an environment variable (api_key_env, "
        "password_env)\n"
    )
    assert not out.exists()


def test_a_label_longer_than_a_report_holds_is_refused_naming_label(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    code, output = _invoke(
        "--endpoint", CLOSED, "--model", "m", "--rate", "1", "--label", "x" * 121,
        "--out", str(out),
    )  # fmt: skip
    assert code == 2, output
    assert output.endswith("\nerror: --label: label: must have at most 120 characters, got 121\n")
    assert "Traceback" not in output
    assert not out.exists()


def test_reported_engine_line_says_what_the_server_said_and_why_a_part_is_unknown() -> None:
    from tokenwatt.collect.plan.point import reported_engine_line

    assert reported_engine_line("vllm", "0.11.0") == "engine: vllm 0.11.0 as the server reports it"
    # A version that starts with the name (the simulator's) is not named twice.
    assert reported_engine_line("tokenwatt-sim", "tokenwatt-sim 0.1.0") == (
        "engine: tokenwatt-sim 0.1.0 as the server reports it"
    )
    assert reported_engine_line("llama.cpp", "b0-unknown") == (
        "engine: llama.cpp b0-unknown as the server reports it (/props build_info: a build "
        "made without llama.cpp's git history, such as the xllamacpp wheel, has no build "
        "number or commit to report)"
    )
    assert reported_engine_line("tgi", None) == (
        "engine: tgi as the server reports it; it reports no version"
    )
    assert reported_engine_line(None, None).startswith(
        "engine: the server did not say which engine it is"
    )


def test_a_fixed_load_run_names_its_loads_as_the_tables_do(tmp_path: Path) -> None:
    """Against the simulator (started by collect): the progress lines say "load 1 of 2:
    5 req/s" like the window table's "#1 load 1 of 2: 5 req/s", and a run that reads no
    accelerator (adapter none) counts client minutes, not GPU minutes."""
    import os
    import shlex
    import subprocess
    import sys

    sim = shlex.join([sys.executable, "-m", "tokenwatt", "sim", "--port", "{port}"])
    argv = [
        sys.executable, "-m", "tokenwatt", "collect", "--endpoint", "http://127.0.0.1:{port}/v1",
        "--model", "tokenwatt-sim", "--engine-cmd", sim, "--rates", "5,6", "--duration", "2",
        "--warmup", "0.2", "--input-tokens", "16", "--output-tokens", "4",
        "--out", str(tmp_path / "run.json"),
    ]  # fmt: skip
    env = {**os.environ, "COLUMNS": "300"}  # the table's window names unwrapped
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "load 1 of 2: 5 req/s: " in done.stderr
    assert "load 2 of 2: 6 req/s: " in done.stderr and "/2 (" not in done.stderr
    assert "#1 load 1 of 2: 5 req/s" in done.stdout
    assert " client-min, " in done.stdout and "GPU-min" not in done.stdout
    assert "engine: tokenwatt-sim 0.1.0 as the server reports it" in done.stderr


def test_the_record_keeps_which_dtypes_nobody_stated() -> None:
    flags_spec = point_spec(FLAGS, "http://127.0.0.1:8000/v1")
    both = ["model.weight_dtype", "model.kv_dtype"]
    assert unstated_fields(apply_mode(flags_spec, "quick")) == both
    with_kv = adjust_run_spec(flags_spec, None, "fp8")
    assert with_kv.model.kv_dtype == "fp8"
    assert unstated_fields(apply_mode(with_kv, "quick")) == ["model.weight_dtype"]
    stated = load_spec(REPO / "specs" / "sim-demo.spec.yaml")  # names both dtypes
    assert unstated_fields(apply_mode(stated, "quick")) == []
    assert unstated_fields(adjust_run_spec(stated, None, "fp8")) == []


def test_flags_laid_over_a_spec_keep_its_unstated_dtype_unstated(tmp_path: Path) -> None:
    """``collect --spec X --rates …``: a spec that names only the weight dtype still says
    its KV-cache dtype is not stated once the flags are laid over it (was: every field set
    by the re-validation, so the record claimed bf16 KV as stated)."""
    text = (REPO / "specs" / "sim-demo.spec.yaml").read_text()
    assert "  kv_dtype: bf16\n" in text
    path = tmp_path / "one.spec.yaml"
    path.write_text(text.replace("  kv_dtype: bf16\n", ""))
    spec = load_spec(path)
    assert unstated_fields(spec) == ["model.kv_dtype"]
    out = override_spec(spec, PointFlags(rates=(2.0,), vocab_size=2048))
    assert (out.model.kv_dtype, out.model.vocab_size) == ("bf16", 2048)
    assert unstated_fields(out) == ["model.kv_dtype"]
    assert unstated_fields(adjust_run_spec(out, None, "fp8")) == []
