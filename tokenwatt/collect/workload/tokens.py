"""Count tokens with the model's own tokenizer, for output that arrives without ``usage``.

The spec's ``model.tokenizer`` names a ``tokenizer.json`` (the Hugging Face ``tokenizers``
format) or a model folder that holds one. :func:`load_token_counter` reads and checks it
before the first request, so a bad path fails the run at once, naming the spec field, and
never after minutes of measuring. Counts leave special tokens out (no BOS/EOS added): the
text counted is what the server streamed back.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenwatt.errors import InputError, Problem
from tokenwatt.text import valid_unicode

if TYPE_CHECKING:
    from tokenwatt.records import Spec

TOKENIZER_FIELD = "model.tokenizer"
TOKENIZER_FILE = "tokenizer.json"
_CHECK_TEXT = "The quick brown fox jumps over the lazy dog."


class TokenCounter:
    """Token counts of text, with one tokenizer (``count(text) -> int``).

    Attributes:
        path: the ``tokenizer.json`` read.
        vocab_size: the tokenizer's vocabulary size, added tokens included.
    """

    def __init__(self, tokenizer: Any, path: Path) -> None:
        self._tokenizer = tokenizer
        self.path = path
        self.vocab_size: int = tokenizer.get_vocab_size(with_added_tokens=True)

    def count(self, text: str) -> int:
        """Tokens in ``text`` (special tokens not added); 0 for empty text.

        A lone surrogate (from a JSON ``"\\ud800"`` escape a server or dataset wrote) is
        counted as U+FFFD: the tokenizer refuses such a string with a ``TypeError``.
        """
        if not text:
            return 0
        return len(self._tokenizer.encode(valid_unicode(text), add_special_tokens=False).ids)

    def __call__(self, text: str) -> int:
        """Same as :meth:`count`, so that the counter is a ``Callable[[str], int]``."""
        return self.count(text)


def _problem(file: str, message: str) -> InputError:
    return InputError([Problem(file, TOKENIZER_FIELD, message)])


def resolve_tokenizer_path(value: str, base_dir: Path | None, file: str) -> Path:
    """The ``tokenizer.json`` a ``model.tokenizer`` value names.

    A relative path is read from ``base_dir`` (the spec's folder) when it does not exist as
    given; a folder must hold ``tokenizer.json``.

    Raises:
        InputError: no such file or folder, or a folder without ``tokenizer.json``.
    """
    path = Path(value).expanduser()
    if not path.is_absolute() and not path.exists() and base_dir is not None:
        path = base_dir / path
    if path.is_dir():
        inner = path / TOKENIZER_FILE
        if not inner.is_file():
            raise _problem(file, f"folder {path} has no {TOKENIZER_FILE}")
        return inner
    if not path.is_file():
        raise _problem(file, f"no such file or folder: {path}")
    return path


def load_tokenizer(path: Path, file: str = "<spec>") -> TokenCounter:
    """Read one ``tokenizer.json`` and check that it tokenizes.

    Raises:
        InputError: the ``tokenizers`` library is missing, or the file is not a tokenizer
            it can read (named with ``file`` and ``model.tokenizer``).
    """
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:  # a core dependency: only a broken install lacks it
        raise _problem(
            file, f"reading {path} needs the 'tokenizers' package (pip install tokenizers)"
        ) from exc
    try:
        tokenizer = Tokenizer.from_file(str(path))
        counter = TokenCounter(tokenizer, path)
        n = counter.count(_CHECK_TEXT)
    except Exception as exc:  # tokenizers raises bare Exception for every bad file
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise _problem(
            file, f"{path} is not a tokenizer.json that tokenizers can read: {first}"
        ) from exc
    if n <= 0:
        raise _problem(file, f"{path} gives no tokens for plain English text")
    return counter


def load_token_counter(spec: Spec, spec_path: str | Path | None = None) -> TokenCounter | None:
    """The spec's token counter, loaded and checked; None when ``model.tokenizer`` is unset.

    Call it before the first request. A tokenizer whose vocabulary is larger than the
    model's ``vocab_size`` is refused: it is not this model's.

    Raises:
        InputError: bad path, unreadable tokenizer, or a vocabulary that does not fit the
            model (each naming the spec file and ``model.tokenizer``).
    """
    value = spec.model.tokenizer
    if value is None:
        return None
    file = str(spec_path) if spec_path is not None else "<spec>"
    base_dir = Path(spec_path).parent if spec_path is not None else None
    counter = load_tokenizer(resolve_tokenizer_path(value, base_dir, file), file)
    if counter.vocab_size > spec.model.vocab_size:
        raise _problem(
            file,
            f"{counter.path} has {counter.vocab_size:,} tokens, more than model.vocab_size "
            f"({spec.model.vocab_size:,}): it is not this model's tokenizer",
        )
    return counter
