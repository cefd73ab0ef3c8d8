"""What an engine reports about itself (:class:`EngineInfo`), as the probes fill it in
(:func:`tokenwatt.collect.engine.probes.probe_engine`), and the checks of each figure."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tokenwatt.records import MIN_VOCAB, Environment, NonNegInt, StrictModel
from tokenwatt.redact import scrub_capped
from tokenwatt.text import terminal_safe

MAX_CONTEXT_TOKENS = 1 << 31
"""Largest context length believed (tokens): no model has one near two billion tokens, so a
larger figure is a broken or hostile answer."""
MAX_VOCAB_TOKENS = 1 << 24
"""Largest vocabulary believed (tokens): current models have 32,000 to about 260,000, so a
figure above 16.7 million is a broken or hostile answer."""


def as_int(value: Any) -> int | None:
    """``value`` as a whole number ≥ 0 (an int, a whole float or a digit string); None
    otherwise (booleans included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)  # ASCII digits only: "²" and "١٢" are digits to str.isdigit()
    return None


LLAMACPP_FTYPES = {"all f32": "fp32", "f32": "fp32", "f16": "fp16", "bf16": "bf16"}
"""llama.cpp's names of unquantized weight types (``llama_model_ftype_name``) and the spec's
dtype for each. Its quantized types (``Q8_0``, ``Q4_K - Medium`` …) store per-block scales
beside the weights (Q8_0: 34 bytes per 32 weights), which no dtype here counts exactly, so
``init`` names them in a comment and writes none, and ``collect`` keeps its default."""


class EngineInfo(StrictModel):
    """What an engine reports about itself.

    Attributes:
        endpoint: the endpoint as given (with or without ``/v1``).
        engine_name: ``"vllm"``, ``"sglang"``, ``"llama.cpp"``, ``"tgi"`` or None (unknown).
        engine_version: the version string the engine reports, None when it has no endpoint
            for it.
        served_models: model ids from ``/v1/models``.
        max_model_len: the engine's context length: the longest sequence (prompt + output,
            tokens) one request may have, where the engine says (vLLM and SGLang
            ``/v1/models`` ``max_model_len``, SGLang ``/server_info`` ``context_length``,
            llama.cpp ``/props`` ``default_generation_settings.n_ctx`` (one slot's), TGI
            ``/info`` ``max_total_tokens``).
        context_length_source: where ``max_model_len`` was read (for the record's reader).
        kv_capacity_tokens: tokens the KV cache holds across all sequences, where the engine
            reports its cache configuration.
        kv_capacity_source: how ``kv_capacity_tokens`` was derived (for the record's reader).
        metrics_available: whether ``/metrics`` answered with Prometheus text.
        notes: probe steps that failed or were ambiguous, in words.
        context_length_problem: the first context length the engine gave that is not a
            positive whole number of tokens (it was ignored), in words; None when none.
        proxy: the proxy the probe went through, in words
            (:attr:`tokenwatt.netpath.NetworkPath.described`); None when direct.
        vocab_size: the served model's vocabulary (tokens), where the engine says
            (llama.cpp's ``/v1/models`` ``meta.n_vocab``); None otherwise.
        vocab_source: where ``vocab_size`` was read.
        weight_format: the weights' storage type as the engine names it (llama.cpp's
            ``/v1/models`` ``meta.ftype``: ``all F32``, ``F16``, ``BF16``, ``Q4_K - Medium``
            …), made terminal-safe and capped; None where the engine does not say.
    """

    endpoint: str
    engine_name: str | None = None
    engine_version: str | None = None
    served_models: list[str] = Field(default_factory=list)
    max_model_len: NonNegInt | None = None
    context_length_source: str | None = None
    kv_capacity_tokens: NonNegInt | None = None
    kv_capacity_source: str | None = None
    metrics_available: bool = False
    notes: list[str] = Field(default_factory=list)
    context_length_problem: str | None = None
    proxy: str | None = None
    vocab_size: NonNegInt | None = None
    vocab_source: str | None = None
    weight_format: str | None = None

    def apply_to(self, env: Environment) -> Environment:
        """A copy of ``env`` with the engine fields filled from this probe (None keeps old)."""
        update: dict[str, Any] = {"served_models": list(self.served_models), "proxy": self.proxy}
        if self.engine_name is not None:
            update["engine_name"] = self.engine_name
        if self.engine_version is not None:
            update["engine_version"] = self.engine_version
        if self.kv_capacity_tokens is not None:
            update["kv_capacity_tokens"] = self.kv_capacity_tokens
            update["kv_capacity_source"] = self.kv_capacity_source
        if self.max_model_len is not None:
            update["context_length_tokens"] = self.max_model_len
            update["context_length_source"] = self.context_length_source
        return env.model_copy(update=update)

    @property
    def weight_dtype(self) -> str | None:
        """The spec's ``model.weight_dtype`` for the weights the engine reports, where it is
        an unquantized type this package names exactly (:data:`LLAMACPP_FTYPES`); None
        otherwise."""
        if self.weight_format is None:
            return None
        return LLAMACPP_FTYPES.get(self.weight_format.lower().replace("(guessed)", "").strip())

    def set_vocab(self, value: Any, source: str) -> None:
        """Keep ``value`` as the vocabulary size (tokens) unless one is known already; a
        value that is not a whole number from 1 to :data:`MAX_VOCAB_TOKENS` is noted and
        ignored."""
        if value is None or self.vocab_size is not None:
            return
        n = as_int(value)
        if n is None or not MIN_VOCAB <= n <= MAX_VOCAB_TOKENS:
            shown = scrub_capped(terminal_safe(repr(value)), 40)
            self.notes.append(f"{source} is {shown}, not a vocabulary size: ignored")
            return
        self.vocab_size = n
        self.vocab_source = source

    def set_context_length(self, value: Any, source: str) -> None:
        """Keep ``value`` as the context length (tokens) unless one is known already.

        A value that is there but is not a positive whole number of tokens below
        :data:`MAX_CONTEXT_TOKENS` (0, −1, "abc") is not kept: it is noted, in
        ``context_length_problem`` too, which ``tokenwatt init`` refuses.
        """
        if value is None or self.max_model_len is not None:
            return
        n = as_int(value)
        if n is None or not 0 < n <= MAX_CONTEXT_TOKENS:
            shown = scrub_capped(terminal_safe(repr(value)), 40)
            problem = f"{source} is {shown}, not a positive whole number of tokens"
            self.notes.append(problem + ": ignored")
            self.context_length_problem = self.context_length_problem or problem
            return
        self.max_model_len = n
        self.context_length_source = source


__all__ = ["LLAMACPP_FTYPES", "MAX_CONTEXT_TOKENS", "MAX_VOCAB_TOKENS", "EngineInfo", "as_int"]
