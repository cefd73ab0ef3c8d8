"""One request's raw timings, as kept by the load generator.

Times are seconds on the client's monotonic clock (``time.perf_counter``). Stored beside a
run record as compressed JSON Lines when asked for; summarised into a
:class:`~tokenwatt.records.run.window.WindowSummary` by ``analysis.latency``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class RequestResult:
    """What one request did.

    Attributes:
        scheduled_s: when the Poisson schedule said to send it (s).
        sent_s: when it was actually sent (s), after any wait for a concurrency slot.
        dispatched_s: when the client got round to it (s), before any wait for a slot;
            ``dispatched_s - scheduled_s`` is the send lag, ``sent_s - dispatched_s`` the
            wait for a concurrency slot (None: use ``sent_s``).
        first_token_s: arrival of the first chunk carrying generated text of any kind,
            reasoning or content (s), or None.
        chunk_s: arrival time of every chunk (SSE event) carrying generated text (s).
        last_token_s: arrival of the last such chunk (s), or None.
        prompt_tokens: prompt length (tokens), from ``usage`` or the request itself.
        output_tokens: generated tokens, from ``usage`` when the server sent it, else the
            number of text chunks (an estimate, ``usage_missing``).
        usage_missing: True when ``output_tokens`` was counted by the client (no usage).
        without_done: True when the stream ended cleanly after a chunk with
            ``finish_reason`` but without ``data: [DONE]``: complete, and counted apart.
        status: HTTP status, or None when no response arrived.
        error: error kind (``timeout``, ``http_503``, ``connect``, ``empty``, …) or None.
            ``cancelled`` only for a request the client itself cancelled (an early stop,
            the end of the keep-load tail): never an engine error. A request of the window
            still open at the tail cap is a ``timeout`` when it had no first token and
            ``censored`` when it was still streaming (both misses; methods/goodput.md).
        error_class: the exception class of a failure (``ServerDisconnectedError``,
            ``TimeoutError``, …); None for an HTTP error status or no failure.
        error_message: what the failure said (HTTP status line or exception message),
            credentials scrubbed, at most 300 characters; None without failure.
        error_body: the first characters of an error response's body (at most 512),
            credentials scrubbed; None when there was none.
        transport_retries: times the request was sent again on a new connection because
            it provably never reached the server (connection not made, or the request not
            completely written); its latencies still count from ``scheduled_s``.
        finished_s: when the request ended (s): the end of the response stream (after
            ``[DONE]``; the ``[DONE]`` read itself when the server held the body open more
            than 0.1 s after it), or when it failed or timed out; None while in flight.
        in_window: True when the request arrived inside the measurement window.
        max_tokens: the ``max_tokens`` asked for, or None when unknown.
        ignore_eos: the request asked for exactly ``max_tokens`` (``ignore_eos``).
        prompt_ids_sent: the number of prompt token ids sent, or None for a text prompt.
        prompt_text_tokens: a text prompt's length measured with the model's tokenizer
            before sending (tokens, without the chat template), or None: ids were sent, or
            the text was not measured.
        first_content_s: arrival of the first chunk carrying *content* (not reasoning)
            text (s), or None; equals ``first_token_s`` for a model that does not reason.
        reasoning: True when the stream carried reasoning text (``reasoning_content`` or
            ``reasoning`` deltas).
        output_text: the generated text's pieces, kept only when the server sent no
            ``usage`` (so that a tokenizer can count them afterwards); else None.
    """

    scheduled_s: float
    sent_s: float = 0.0
    first_token_s: float | None = None
    chunk_s: list[float] = field(default_factory=list)
    last_token_s: float | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    usage_missing: bool = False
    without_done: bool = False
    status: int | None = None
    error: str | None = None
    in_window: bool = True
    dispatched_s: float | None = None
    finished_s: float | None = None
    max_tokens: int | None = None
    ignore_eos: bool = False
    prompt_ids_sent: int | None = None
    prompt_text_tokens: int | None = None
    first_content_s: float | None = None
    reasoning: bool = False
    output_text: list[str] | None = None
    error_class: str | None = None
    error_message: str | None = None
    error_body: str | None = None
    transport_retries: int = 0

    @property
    def ok(self) -> bool:
        """True when the request finished without error and produced at least one token."""
        return self.error is None and self.first_token_s is not None
