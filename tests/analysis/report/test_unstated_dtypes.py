"""Dtypes nobody stated: a spec built from ``collect`` flags names no weight or KV dtype,
and the report must not present the spec model's ``bf16`` defaults as facts."""

from __future__ import annotations

import yaml

from tests.runs_factory import SPEC_PATH, make_run, tuned_run
from tokenwatt.analysis import summarise
from tokenwatt.records import RunRecord, Spec, run_unstated, unstated_fields
from tokenwatt.records.run.run_input import RunInput

FLAGS_COMMAND = (
    "tokenwatt collect --endpoint http://127.0.0.1:8080/v1 --model my-model --rates 2,4 "
    "--label first --out runs/first.json"
)


def _report(*runs: RunRecord):  # type: ignore[no-untyped-def]
    inputs = [RunInput(f"runs/{r.label}.json", f"{i:x}" * 64, r) for i, r in enumerate(runs, 10)]
    return summarise(inputs, title="t")


def test_a_spec_without_dtypes_names_both_as_unstated() -> None:
    data = yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))
    assert unstated_fields(Spec.model_validate(data)) == []
    del data["model"]["weight_dtype"]
    del data["model"]["kv_dtype"]
    spec = Spec.model_validate(data)
    assert spec.model.weight_dtype == "bf16"  # the default is still there for MBU
    assert unstated_fields(spec) == ["model.weight_dtype", "model.kv_dtype"]


def test_an_older_flags_built_record_is_read_from_its_command_line() -> None:
    run = make_run().model_copy(update={"command": FLAGS_COMMAND})
    assert run_unstated(run) == {"model.weight_dtype", "model.kv_dtype"}
    with_kv = run.model_copy(update={"command": FLAGS_COMMAND + " --kv-dtype fp8"})
    assert run_unstated(with_kv) == {"model.weight_dtype"}
    # a --spec run made before the field existed cannot be told: taken as stated
    assert run_unstated(make_run()) == frozenset()
    # the record's own list wins over the command line
    assert run_unstated(run.model_copy(update={"spec_unstated": []})) == frozenset()


def test_the_report_says_not_stated_and_that_mbu_assumed_them() -> None:
    base = make_run().model_copy(update={"spec_unstated": ["model.weight_dtype", "model.kv_dtype"]})
    report = _report(base)
    cfg = report.configs[0]
    assert cfg.engine == "vLLM 0.31.0 · KV NOT STATED"
    assert cfg.settings["kv_dtype"] == "not stated"
    assert cfg.settings["weight_dtype"] == "not stated"
    assert report.model.quantization == "weight dtype not stated; KV-cache dtype not stated"
    assert (
        "MBU for vllm-default assumes fp8 weights (model.weight_dtype) and a bf16 KV cache "
        "(model.kv_dtype): nobody stated them (the spec's defaults), so its bytes per weight "
        "and per KV element may be wrong"
    ) in report.not_covered


def test_a_stated_run_reads_as_before() -> None:
    report = _report(make_run(), tuned_run())
    base, tuned = report.configs
    assert base.engine == "vLLM 0.31.0 · KV BF16" and tuned.engine == "vLLM 0.31.0 · KV FP8"
    assert report.model.quantization.endswith("; KV cache varies by configuration")
    assert not any(i.startswith("MBU for") and "assumes" in i for i in report.not_covered)


def test_only_the_unstated_one_is_said() -> None:
    run = make_run().model_copy(update={"spec_unstated": ["model.weight_dtype"]})
    report = _report(run)
    assert report.model.quantization == "weight dtype not stated; KV cache bf16"


def test_a_summary_without_hardware_says_it_was_not_stated() -> None:
    run = make_run()
    spec = run.spec.model_copy(
        update={"hardware": run.spec.hardware.model_copy(update={"adapter": "none"})}
    )
    env = run.environment.model_copy(update={"gpu_name": None, "gpu_count": None})
    report = _report(run.model_copy(update={"spec": spec, "environment": env}))
    assert report.summary.startswith("Quick mode on hardware not stated: 120 s windows")
