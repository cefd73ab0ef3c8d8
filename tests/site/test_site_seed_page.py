"""The seed report's page as a fresh reader checks it: the Reproduce block runs the FP8
configuration with its KV dtype, says the run files are not shipped, "Not covered" names
whole-node power once, and the hardware rows say where a figure the spec left unset came
from."""

from __future__ import annotations

from pathlib import Path

from sitecase import deep, seed_data
from test_site_reader import SEED_PAGE, build_one, section, tables, text_of

BASE = "tokenwatt run --spec lambda-qwen3-30b-a3b-fp8-tp1-dp1.spec.yaml"


def test_reproduce_runs_the_fp8_configuration_with_its_kv_dtype(
    tmp_path: Path, cache_dir: Path
) -> None:
    page = text_of(build_one(tmp_path, cache_dir, seed_data()) / SEED_PAGE)
    block = section(page, "## Reproduce").split("```sh\n", 1)[1].split("```", 1)[0]
    assert block.splitlines()[:2] == [
        f"{BASE} --label 'vllm-default' --role baseline --out runs/vllm-default.json",
        f"{BASE} --label 'vllm-fp8kv' --role tuned --kv-dtype fp8 --out runs/vllm-fp8kv.json",
    ]
    assert (
        "The `--kv-dtype fp8` on the vllm-fp8kv line is added here: the command the record "
        "keeps lacks it, though that configuration's KV cache was FP8."
    ) in page
    # A command that already carries it is left alone, and nothing is said.
    data = deep(seed_data())
    data["reproduce"] = data["reproduce"].replace("--role tuned", "--role tuned --kv-dtype fp8")
    page = text_of(build_one(tmp_path / "b", cache_dir, data) / SEED_PAGE)
    assert page.count("--kv-dtype fp8") == 1 and "is added here" not in page


def test_reproduce_says_the_run_files_are_not_shipped_unless_they_are(
    tmp_path: Path, cache_dir: Path
) -> None:
    note = (
        "The run records these commands write and read (`runs/vllm-default.json`, "
        "`runs/vllm-fp8kv.json`) are not shipped in this repository"
    )
    assert note in text_of(build_one(tmp_path, cache_dir, seed_data()) / SEED_PAGE)
    runs = tmp_path / "b" / "runs"
    runs.mkdir(parents=True)
    (runs / "vllm-default.json").write_text("{}", encoding="utf-8")
    page = text_of(build_one(tmp_path / "b", cache_dir, seed_data()) / SEED_PAGE)
    assert "(`runs/vllm-fp8kv.json`) are not shipped" in page
    (runs / "vllm-fp8kv.json").write_text("{}", encoding="utf-8")
    page = text_of(build_one(tmp_path / "b", cache_dir, seed_data()) / SEED_PAGE)
    assert "not shipped" not in page


def test_not_covered_names_whole_node_power_once(tmp_path: Path, cache_dir: Path) -> None:
    page = text_of(build_one(tmp_path, cache_dir, seed_data()) / SEED_PAGE)
    items = [line for line in section(page, "## Not covered").splitlines() if line.startswith("- ")]
    assert items == [
        "- Whole-node power (cloud VM: no BMC access): energy figures are GPU board power "
        "only (no CPUs, memory, NICs, fans or PSU losses)",
        "- Context lengths beyond the chat-mix-v1 trace",
        "- Quick mode: short windows, few repeats — validation only, not for publishing",
    ]


def _hardware(tmp_path: Path, cache_dir: Path, data: dict[str, object]) -> dict[str, str]:
    page = text_of(build_one(tmp_path, cache_dir, data) / SEED_PAGE)
    rows = tables(section(page, "## Setup").split("### Hardware", 1)[1].split("###", 1)[0])[0]
    return {r[0]: r[1] for r in rows[1:]}


def test_hardware_rows_say_where_figures_the_spec_left_unset_came_from(
    tmp_path: Path, cache_dir: Path
) -> None:
    rows = _hardware(tmp_path, cache_dir, seed_data())
    assert rows["Count"] == (
        "1 (every GPU the nvidia adapter read: the spec's `hardware.gpus` is not set)"
    )
    assert rows["Rated memory bandwidth per GPU"] == (
        "3.35 TB/s (the accelerator table's figure for NVIDIA H100 80GB HBM3: the spec's "
        "`hardware.rated_bw_tbs_per_gpu` is not set)"
    )
    data = deep(seed_data())
    data["spec"]["hardware"].update(gpus=[0], rated_bw_tbs_per_gpu=3.35)
    rows = _hardware(tmp_path / "b", cache_dir, data)
    assert rows["Count"] == "1" and rows["Rated memory bandwidth per GPU"] == "3.35 TB/s"
