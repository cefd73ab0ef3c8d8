"""The simulated engine's model: continuous batching over a KV cache of fixed capacity.

Pure and clock-free: every method takes the time (ms) from the caller, so the same model
runs in real time behind the HTTP server (:mod:`tokenwatt.sim.server`) and in virtual time
(:func:`simulate`) for tests and for finding its SLO boundary independently of the
collector.

The model, one *iteration* at a time (after vLLM's scheduler, much simplified):

* At the start of an iteration, waiting requests are admitted first-come first-served while
  the KV cache has room for their whole sequence (prompt + ``max_tokens``, rounded up to
  whole blocks), the running batch is below ``max_num_seqs`` and the iteration's prefill
  budget allows. Space is reserved at admission, so nothing is ever preempted; a full cache
  makes requests wait, and time to first token grows with the queue.
* The iteration lasts ``step_base_ms + step_per_seq_ms × batch + prefill_ms_per_token ×
  new prompt tokens``: a decode step slows as the batch grows (TPOT rises), and prefill
  grows with prompt length.
* At its end every request in the batch has one more token (new ones their first); those
  that reached ``max_tokens`` finish and free their blocks.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Profile:
    """A simulated configuration.

    Attributes:
        name: profile name (``--profile``).
        kv_capacity_tokens: KV-cache capacity (tokens).
        block_size: tokens per KV block (vLLM's default 16).
        max_num_seqs: most requests in one batch.
        max_prefill_tokens: most new prompt tokens admitted per iteration.
        step_base_ms: decode step time with an empty batch (ms).
        step_per_seq_ms: added step time per running request (ms).
        prefill_ms_per_token: added iteration time per new prompt token (ms).
        idle_power_w, power_per_seq_w, max_power_w: board power model (W): idle plus a
            share per running request, capped.
        kv_dtype: what the profile stands for (``bf16`` or ``fp8``).
    """

    name: str
    kv_capacity_tokens: int
    step_base_ms: float
    step_per_seq_ms: float
    prefill_ms_per_token: float
    block_size: int = 16
    max_num_seqs: int = 256
    max_prefill_tokens: int = 8192
    idle_power_w: float = 90.0
    power_per_seq_w: float = 14.0
    max_power_w: float = 700.0
    kv_dtype: str = "bf16"

    @property
    def num_gpu_blocks(self) -> int:
        """KV blocks: capacity / block size, rounded down."""
        return self.kv_capacity_tokens // self.block_size

    def step_ms(self, batch: int, new_prompt_tokens: int = 0) -> float:
        """One iteration's duration (ms) for ``batch`` running requests."""
        return (
            self.step_base_ms
            + self.step_per_seq_ms * batch
            + self.prefill_ms_per_token * new_prompt_tokens
        )

    def slowed(self, factor: float) -> Profile:
        """This profile with every duration (step base, per request, per prompt token)
        multiplied by ``factor``: the same queueing story at ``1 / factor`` the rates.

        A slower simulator needs less CPU per simulated second, so the scheduling jitter of
        a busy machine is smaller next to its step times (the end-to-end tests use 2).

        Raises:
            ValueError: ``factor`` is not a finite number > 0.
        """
        if not (math.isfinite(factor) and factor > 0):
            raise ValueError(f"the time scale must be a finite number > 0, got {factor}")
        return replace(
            self,
            step_base_ms=self.step_base_ms * factor,
            step_per_seq_ms=self.step_per_seq_ms * factor,
            prefill_ms_per_token=self.prefill_ms_per_token * factor,
        )

    def power_w(self, batch: int) -> float:
        """Board power (W) while ``batch`` requests run."""
        if batch == 0:
            return self.idle_power_w
        return min(self.max_power_w, self.idle_power_w + self.power_per_seq_w * batch)


# The two profiles of the seed lab note's story, scaled to milliseconds so a whole search
# runs in seconds: FP8 KV doubles the capacity and makes each step about 10% slower
# (dequantisation), so BF16 fails by queueing (TTFT) and FP8 by per-token latency (TPOT).
PROFILES: dict[str, Profile] = {
    "bf16-kv": Profile(
        name="bf16-kv",
        kv_capacity_tokens=1280,
        step_base_ms=40.0,
        step_per_seq_ms=0.8,
        prefill_ms_per_token=0.02,
        power_per_seq_w=9.0,
        kv_dtype="bf16",
    ),
    "fp8-kv": Profile(
        name="fp8-kv",
        kv_capacity_tokens=2560,
        step_base_ms=42.0,
        step_per_seq_ms=0.84,
        prefill_ms_per_token=0.02,
        power_per_seq_w=7.5,
        kv_dtype="fp8",
    ),
}


@dataclass(eq=False)
class SimRequest:
    """One request inside the model (times in ms on the caller's clock)."""

    prompt_tokens: int
    max_tokens: int
    arrival_ms: float
    generated: int = 0
    blocks: int = 0
    first_token_ms: float | None = None
    last_token_ms: float | None = None
    token_ms: list[float] = field(default_factory=list)
    keep_token_times: bool = False
    aborted: bool = False

    @property
    def done(self) -> bool:
        """All ``max_tokens`` tokens have been generated."""
        return self.generated >= self.max_tokens


@dataclass
class Iteration:
    """One planned iteration: the batch, the start and end times (ms)."""

    batch: list[SimRequest]
    start_ms: float
    end_ms: float
    admitted: int


class Engine:
    """The scheduler state: waiting queue, running batch, KV blocks in use."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.blocks_used = 0
        self.finished = 0
        self.queued = 0
        """Requests left waiting by the last admission: vLLM records its waiting gauge after
        scheduling, so arrivals between two iterations are not counted as queued."""

    def blocks_for(self, req: SimRequest) -> int:
        """KV blocks a request reserves: prompt + max_tokens, rounded up to blocks."""
        return math.ceil((req.prompt_tokens + req.max_tokens) / self.profile.block_size)

    def fits_ever(self, prompt_tokens: int, max_tokens: int) -> bool:
        """False when the sequence could never fit in the KV cache (reject it)."""
        need = math.ceil((prompt_tokens + max_tokens) / self.profile.block_size)
        return need <= self.profile.num_gpu_blocks

    def add(self, req: SimRequest) -> None:
        """Queue a request; it is admitted at the next iteration that has room."""
        self.waiting.append(req)

    def abort(self, req: SimRequest) -> None:
        """Drop a request whose client went away, freeing its KV blocks."""
        if req.aborted:
            return
        req.aborted = True
        if req in self.running:
            self.running.remove(req)
            self.blocks_used -= req.blocks
        elif req in self.waiting:
            self.waiting.remove(req)
            # The gauge must not keep counting a request that is gone: once every client
            # has left no iteration runs, and a stale count would read as a busy engine.
            self.queued = min(self.queued, len(self.waiting))

    @property
    def idle(self) -> bool:
        """Nothing running and nothing waiting."""
        return not self.running and not self.waiting

    @property
    def kv_usage(self) -> float:
        """Share of KV blocks in use, 0..1 (vLLM's ``kv_cache_usage_perc`` is a fraction)."""
        return self.blocks_used / max(1, self.profile.num_gpu_blocks)

    def begin(self, now_ms: float) -> Iteration | None:
        """Admit what fits and plan the next iteration starting at ``now_ms``.

        Returns None when nothing can run (idle, or the queue head does not fit yet and
        nothing is running — which :meth:`fits_ever` prevents).
        """
        p = self.profile
        new_tokens = 0
        admitted = 0
        while self.waiting and len(self.running) < p.max_num_seqs:
            head = self.waiting[0]
            need = self.blocks_for(head)
            if self.blocks_used + need > p.num_gpu_blocks:
                break
            if admitted and new_tokens + head.prompt_tokens > p.max_prefill_tokens:
                break
            self.waiting.popleft()
            head.blocks = need
            self.blocks_used += need
            self.running.append(head)
            new_tokens += head.prompt_tokens
            admitted += 1
        self.queued = len(self.waiting)
        if not self.running:
            return None
        batch = list(self.running)
        return Iteration(batch, now_ms, now_ms + p.step_ms(len(batch), new_tokens), admitted)

    def complete(self, it: Iteration) -> list[SimRequest]:
        """Give every request of the iteration one token at ``it.end_ms``; free finished ones.

        Returns the requests that finished.
        """
        done: list[SimRequest] = []
        for req in it.batch:
            req.generated += 1
            if req.first_token_ms is None:
                req.first_token_ms = it.end_ms
            req.last_token_ms = it.end_ms
            if req.keep_token_times:
                req.token_ms.append(it.end_ms)
            if req.done:
                done.append(req)
        if done:
            finished = set(map(id, done))
            self.running = [r for r in self.running if id(r) not in finished]
            for req in done:
                self.blocks_used -= req.blocks
            self.finished += len(done)
        return done


def simulate(profile: Profile, arrivals: list[tuple[float, int, int]]) -> list[SimRequest]:
    """Run the model in virtual time over a list of arrivals.

    Args:
        profile: the configuration.
        arrivals: (arrival time in ms, prompt tokens, max_tokens), sorted by time.

    Returns:
        The requests, in arrival order, with first and last token times (ms) filled in.
    """
    engine = Engine(profile)
    reqs = [SimRequest(p, m, t) for t, p, m in arrivals]
    i = 0
    now = 0.0
    while i < len(reqs) or not engine.idle:
        while i < len(reqs) and reqs[i].arrival_ms <= now:
            engine.add(reqs[i])
            i += 1
        it = engine.begin(now)
        if it is None:
            now = max(now, reqs[i].arrival_ms)
            continue
        engine.complete(it)
        now = it.end_ms
    return reqs
