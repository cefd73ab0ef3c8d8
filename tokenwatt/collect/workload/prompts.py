"""Requests and the seeded ``chat-mix-v1`` draws they are made of.

``chat-mix-v1`` draws input and output lengths from seeded lognormal distributions whose
median and 90th percentile match the spec (defaults from the seed lab note: input median 1,024 /
p90 4,096 tokens, output median 256 / p90 1,024 tokens) and sends random token ids, so
lengths are exact without a tokenizer. Random ids also keep prompts apart: two prompts
share their first 16-token block (vLLM's default prefix-cache block) with probability
``vocab**-16``, so an engine's prefix cache finds nothing unless a shared prefix is asked
for (:class:`SharedPrefix`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenwatt.records import LengthDist

CHAT_MIX_V1 = "chat-mix-v1"
DEFAULT_INPUT_TOKENS = LengthDist(median=1024, p90=4096)
DEFAULT_OUTPUT_TOKENS = LengthDist(median=256, p90=1024)

# z such that P(N(0,1) <= z) = 0.9, i.e. scipy.stats.norm.ppf(0.9).
_Z90 = 1.2815515655446004
LOWEST_TOKEN_ID = 10
"""Token ids below this are left out: most vocabularies keep control tokens (BOS, EOS, pad,
unk) among the first few ids."""
# Words for text prompts (chat API, which has no token-id prompts); each is one token in
# the common BPE vocabularies, so a prompt of n words is about n tokens.
_WORD_TEXT = (
    "the of and to in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there one all we their has been if more when "
    "will would who so no out up into do any your what some can time could them see other"
)
WORDS = tuple(_WORD_TEXT.split())

PREFIX_STREAM = 1
"""Second word of the shared prefix's seed (``[workload.seed, 1]``): the prefix has a
random stream of its own, so asking for one leaves every request's own draws unchanged."""


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request of a workload.

    Attributes:
        prompt: token ids (for ``/v1/completions``) or text.
        max_tokens: exact output length asked for (tokens; sent with ``ignore_eos``).
        id: optional name from a trace, kept for the per-request record.
        synthetic: the prompt's ids were drawn at random by the workload (a trace entry
            given as lengths), so a later pass over the trace may draw new ones.
        text_tokens: a text prompt's length measured with the model's tokenizer (tokens,
            special tokens and chat template not included), or None: not measured.
    """

    prompt: list[int] | str
    max_tokens: int
    id: str | None = None
    synthetic: bool = False
    text_tokens: int | None = None

    @property
    def prompt_tokens(self) -> int | None:
        """Prompt length in tokens when the prompt is token ids, else None (unknown)."""
        return len(self.prompt) if isinstance(self.prompt, list) else None


def lognormal_params(dist: LengthDist) -> tuple[float, float]:
    """(mu, sigma) of the lognormal whose median and 90th percentile are ``dist``'s.

    median = exp(mu); p90 = exp(mu + z90 · sigma), with z90 the standard normal's 0.9 quantile.
    """
    mu = math.log(dist.median)
    sigma = math.log(dist.p90 / dist.median) / _Z90
    return mu, sigma


def random_ids(rng: np.random.Generator, vocab_size: int, n: int) -> list[int]:
    """``n`` token ids drawn uniformly from ``[LOWEST_TOKEN_ID, vocab_size)``."""
    return rng.integers(LOWEST_TOKEN_ID, vocab_size, n).tolist()  # type: ignore[no-any-return]


def random_words(rng: np.random.Generator, n: int) -> str:
    """``n`` words of :data:`WORDS` drawn uniformly, space-separated (about ``n`` tokens)."""
    return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), n).tolist())


@dataclass(frozen=True, slots=True)
class SharedPrefix:
    """A deliberate shared prefix: the same ids (or words) in front of every prompt.

    Attributes:
        ids: prefix for token-id prompts.
        text: prefix for text prompts (about as many words as ``ids`` has tokens), ending
            in a space so that the prompt's first word stays a word of its own.
    """

    ids: list[int]
    text: str

    @property
    def tokens(self) -> int:
        """Prefix length, tokens (of the id prefix; the text's is about the same)."""
        return len(self.ids)

    @classmethod
    def seeded(cls, seed: int, vocab_size: int, n_tokens: int) -> SharedPrefix:
        """The prefix of ``n_tokens`` tokens for ``seed``: seeded with ``[seed, 1]``."""
        if n_tokens == 0:
            return cls(ids=[], text="")
        rng = np.random.default_rng([seed, PREFIX_STREAM])
        ids = random_ids(rng, vocab_size, n_tokens)
        return cls(ids=ids, text=random_words(rng, n_tokens) + " ")

    def apply(self, prompt: list[int] | str) -> list[int] | str:
        """``prompt`` with the prefix in front (ids before ids, text before text)."""
        if not self.ids:
            return prompt
        if isinstance(prompt, str):
            return self.text + prompt
        return self.ids + prompt


class ChatMix:
    """The ``chat-mix-v1`` draws: one request per :meth:`draw`, seeded and endless.

    Input and output lengths come from lognormals fitted to the given median and p90
    (tokens), rounded, at least 1. A request longer than ``max_total_tokens`` (prompt,
    shared prefix included, plus output) is shortened to fit: the output first, to the
    context less the prefix and one prompt token, then the prompt; :attr:`clipped` counts
    them. Only the far tail is cut when the medians fit (the preflight check refuses a
    workload whose medians do not).

    Raises:
        ValueError: ``vocab_size`` leaves no ids to draw from.
    """

    def __init__(
        self,
        seed: int,
        vocab_size: int,
        input_tokens: LengthDist | None = None,
        output_tokens: LengthDist | None = None,
        *,
        max_total_tokens: int | None = None,
        text: bool = False,
        prefix: SharedPrefix | None = None,
    ) -> None:
        if vocab_size <= LOWEST_TOKEN_ID:
            raise ValueError(f"vocab_size must exceed {LOWEST_TOKEN_ID}, got {vocab_size}")
        self.vocab_size = vocab_size
        self.mu_in, self.sigma_in = lognormal_params(input_tokens or DEFAULT_INPUT_TOKENS)
        self.mu_out, self.sigma_out = lognormal_params(output_tokens or DEFAULT_OUTPUT_TOKENS)
        self.rng = np.random.default_rng(seed)
        self.max_total_tokens = max_total_tokens
        self.text = text
        self.prefix = prefix or SharedPrefix(ids=[], text="")
        self.clipped = 0

    def lengths(self) -> tuple[int, int]:
        """The next (prompt, output) lengths in tokens, before the prefix and clipping."""
        n_in = max(1, round(float(self.rng.lognormal(self.mu_in, self.sigma_in))))
        n_out = max(1, round(float(self.rng.lognormal(self.mu_out, self.sigma_out))))
        return n_in, n_out

    def _fit(self, n_in: int, n_out: int) -> tuple[int, int]:
        if self.max_total_tokens is None:
            return n_in, n_out
        room = self.max_total_tokens - self.prefix.tokens
        out = min(n_out, max(1, room - 1))
        inp = max(1, min(n_in, room - out))
        if (inp, out) != (n_in, n_out):
            self.clipped += 1
        return inp, out

    def prompt(self, n_in: int) -> list[int] | str:
        """A new prompt of ``n_in`` tokens (ids) or words (text), without the prefix."""
        return (
            random_words(self.rng, n_in)
            if self.text
            else random_ids(self.rng, self.vocab_size, n_in)
        )

    def draw(self) -> RequestSpec:
        """The next request: lengths, then the prompt, prefix in front."""
        n_in, n_out = self._fit(*self.lengths())
        return RequestSpec(prompt=self.prefix.apply(self.prompt(n_in)), max_tokens=n_out)
