"""MBU for a run record: read the model's geometry, then :mod:`tokenwatt.analysis.model.mbu`.

The only I/O here is reading ``model.config`` (a Hugging Face ``config.json``); a spec may
instead carry the same keys inline under ``model.geometry``. MBU uses the repeats at the
found rate: goodput (output tok/s), the mean running batch from ``/metrics``, and the mean
decode context (input + output / 2 tokens) of their requests (methods/mbu.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenwatt.errors import InputError
from tokenwatt.records import MbuResult, RunRecord, Spec


def _config(spec: Spec) -> tuple[dict[str, Any] | None, str]:
    from tokenwatt.records import read_json

    if spec.model.geometry:
        return dict(spec.model.geometry), "spec: model.geometry"
    if spec.model.config and Path(spec.model.config).is_file():
        data = read_json(Path(spec.model.config), InputError)
        if isinstance(data, dict):
            return data, spec.model.config
    return None, ""


def mbu_for(spec: Spec, record: RunRecord) -> tuple[MbuResult | None, str | None]:
    """The record's MBU block, or None and a not-covered note saying what was missing.

    Never raises for missing inputs: a run without geometry, bandwidth or ``/metrics``
    simply has no MBU, and the note says why.
    """
    from tokenwatt.analysis import (
        bytes_per_decode_step,
        decode_steps_per_s,
        geometry_from_config,
        mbu_result,
        mean_decode_context_tokens,
    )

    config, source = _config(spec)
    if config is None:
        return None, "MBU: no model geometry (model.config is not a readable config.json)"
    env = record.environment
    bw = spec.hardware.rated_bw_tbs_per_gpu or env.rated_bw_tbs_per_gpu
    if bw is None:
        return None, "MBU: rated memory bandwidth unknown (set hardware.rated_bw_tbs_per_gpu)"
    result = record.result
    final = [
        r
        for r in record.repeats
        if result is not None and r.window.rate_rps == result.rate_rps and r.window.slo_pass
    ]
    batches = [r.metrics.running_mean for r in final if r.metrics and r.metrics.running_mean]
    if not final or not batches:
        return None, "MBU: no passing repeat with the engine's running batch from /metrics"
    running = sum(batches) / len(batches)
    requests = sum(r.window.requests for r in final) or 1
    mean_in = sum(r.window.input_tokens for r in final) / requests
    mean_out = sum(r.window.output_tokens for r in final) / requests
    goodput = sum(r.window.goodput_tok_s for r in final) / len(final)
    gpus = env.gpu_count or spec.model.tensor_parallel * spec.model.replicas
    try:
        g = geometry_from_config(config, source)
        step = bytes_per_decode_step(
            g,
            weight_dtype=spec.model.weight_dtype,
            kv_dtype=spec.model.kv_dtype,
            running_batch=running,
            mean_context_tokens=mean_decode_context_tokens(mean_in, mean_out),
        )
        return (
            mbu_result(
                step,
                steps_per_s=decode_steps_per_s(goodput, running),
                running_batch=running,
                rated_bw_tbs_per_gpu=bw,
                gpus=gpus,
            ),
            None,
        )
    except (InputError, ValueError) as exc:
        return None, f"MBU: not computed ({exc})"
