"""A tiny random-weight Llama for the real-engine tests, made locally (no downloads).

The tokenizer is a byte-level BPE trained with ``tokenizers`` on text that ships with
Python itself (``pydoc_data/topics.py``, ``LICENSE.txt``, ``this.py``). The model is written
twice: as GGUF (llama.cpp) and as a Hugging Face folder (config.json, tokenizer.json,
model.safetensors) for vLLM.

The weights are random, but shaped so the output behaves:

* every embedding carries a large constant in dimension 0, so after the final RMSNorm that
  dimension dominates and ``lm_head[:, 0]`` acts as a per-token bias;
* that bias is 0 for tokens that decode to printable ASCII and -5 for everything else
  (partial UTF-8 bytes, control characters, specials), so each generated token is clean
  text and arrives as its own streamed chunk;
* the end token (id 0) gets a bias chosen by ``eos``: ``"never"`` makes it practically
  never sampled, so every response is exactly ``max_tokens`` long even without
  ``ignore_eos``; ``"sometimes"`` gives variable lengths; ``"always"`` makes it the argmax
  at every step (for ``ignore_eos`` tests).

vLLM's CPU attention needs a head size of at least 32: the defaults (hidden 128, 4 heads)
give 32. Making the model takes well under a second on one core.
"""

from __future__ import annotations

import json
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

EosMode = Literal["never", "sometimes", "always"]

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # id 0 is BOS, EOS and PAD
EOS_ID = 0
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Bias on the end token's logit (see the module docstring): -5 is far below the 0 of the
# printable tokens; 0.4 gives a few per cent per step at temperature 1; +5 always wins.
_EOS_BIAS = {"never": -5.0, "sometimes": 0.40, "always": 5.0}


@dataclass(frozen=True)
class TinyModel:
    """Where a generated model lies and what it is.

    Attributes:
        gguf: the GGUF file for llama.cpp.
        hf_dir: the Hugging Face folder for vLLM.
        vocab_size: number of token ids (prompt token ids must be below it).
        printable_ids: ids of tokens that decode to printable ASCII (safe prompt tokens).
        eos_id: the end token's id.
        eos: the end-token behaviour it was made with.
        max_position_embeddings: the context length written into the model.
    """

    gguf: Path
    hf_dir: Path
    vocab_size: int
    printable_ids: tuple[int, ...]
    eos_id: int
    eos: EosMode
    max_position_embeddings: int


def _corpus_files() -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    candidates = [stdlib / "pydoc_data" / "topics.py", stdlib / "LICENSE.txt", stdlib / "this.py"]
    files = [str(p) for p in candidates if p.exists()]
    if not files:
        raise RuntimeError(f"no text corpus for the tokenizer found under {stdlib}")
    return files


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte → printable-character table used by byte-level BPE."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs], strict=True))


def _train_tokenizer(vocab_size: int):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train(_corpus_files(), trainer)
    return tok


def _permute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF → GGUF rotary layout, as llama.cpp's ``convert_hf_to_gguf.py`` permutes Q and K."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def make_tiny_model(
    outdir: Path,
    *,
    eos: EosMode = "never",
    vocab: int = 2048,
    layers: int = 2,
    hidden: int = 128,
    heads: int = 4,
    ff: int = 256,
    ctx: int = 4096,
    seed: int = 1234,
) -> TinyModel:
    """Write a tiny random Llama into ``outdir`` (GGUF file and HF folder) and describe it.

    Args:
        outdir: folder to write into (created); the HF files go to ``outdir/hf``.
        eos: end-token behaviour (module docstring).
        vocab: tokenizer vocabulary size to train (the result may be a little smaller).
        layers, hidden, heads, ff: model shape; head size = hidden / heads (vLLM needs ≥ 32).
        ctx: context length in tokens written into both formats.
        seed: seed of the weights.
    """
    import gguf
    from safetensors.numpy import save_file

    outdir.mkdir(parents=True, exist_ok=True)
    hf_dir = outdir / "hf"
    hf_dir.mkdir(exist_ok=True)

    tok = _train_tokenizer(vocab)
    tok.save(str(hf_dir / "tokenizer.json"))
    tj = json.loads(tok.to_str())
    n_vocab = tok.get_vocab_size()
    id2tok: list[str | None] = [None] * n_vocab
    for t, i in tj["model"]["vocab"].items():
        id2tok[i] = t
    for added in tj.get("added_tokens", []):
        id2tok[added["id"]] = added["content"]
    if any(t is None for t in id2tok):
        raise RuntimeError("tokenizer vocabulary has holes")
    tokens = [t for t in id2tok if t is not None]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]

    u2b = {v: k for k, v in _bytes_to_unicode().items()}
    good = np.zeros(n_vocab, dtype=bool)
    for i, t in enumerate(tokens):
        if t in SPECIALS:
            continue
        try:
            bs = bytes(u2b[c] for c in t)
        except KeyError:
            continue
        good[i] = all(32 <= b < 127 or b == 10 for b in bs)

    rng = np.random.default_rng(seed)
    f32 = np.float32

    def rnd(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(f32)

    embd = rnd(n_vocab, hidden)
    embd[:, 0] = 1.0
    out = rng.standard_normal((n_vocab, hidden)).astype(f32)
    out[:, 0] = np.where(good, 0.0, -5.0)
    out[EOS_ID, 0] = _EOS_BIAS[eos]

    hf: dict[str, np.ndarray] = {
        "model.embed_tokens.weight": embd,
        "model.norm.weight": np.ones(hidden, f32),
        "lm_head.weight": out,
    }
    for layer in range(layers):
        p = f"model.layers.{layer}."
        hf[p + "input_layernorm.weight"] = np.ones(hidden, f32)
        hf[p + "post_attention_layernorm.weight"] = np.ones(hidden, f32)
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            hf[p + f"self_attn.{n}.weight"] = rnd(hidden, hidden)
        hf[p + "mlp.gate_proj.weight"] = rnd(ff, hidden)
        hf[p + "mlp.up_proj.weight"] = rnd(ff, hidden)
        hf[p + "mlp.down_proj.weight"] = rnd(hidden, ff)

    gpath = outdir / f"tiny-llama-eos-{eos}.gguf"
    w = gguf.GGUFWriter(str(gpath), arch="llama")
    w.add_name(f"tiny-random-llama-eos-{eos}")
    w.add_context_length(ctx)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(heads)
    w.add_rope_dimension_count(hidden // heads)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(
        [gguf.TokenType.CONTROL if t in SPECIALS else gguf.TokenType.NORMAL for t in tokens]
    )
    w.add_token_merges(merges)
    w.add_bos_token_id(EOS_ID)
    w.add_eos_token_id(EOS_ID)
    w.add_pad_token_id(EOS_ID)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("output_norm.weight", hf["model.norm.weight"])
    w.add_tensor("output.weight", out)
    for layer in range(layers):
        p = f"model.layers.{layer}."
        b = f"blk.{layer}."
        w.add_tensor(b + "attn_norm.weight", hf[p + "input_layernorm.weight"])
        w.add_tensor(b + "attn_q.weight", _permute_qk(hf[p + "self_attn.q_proj.weight"], heads))
        w.add_tensor(b + "attn_k.weight", _permute_qk(hf[p + "self_attn.k_proj.weight"], heads))
        w.add_tensor(b + "attn_v.weight", hf[p + "self_attn.v_proj.weight"])
        w.add_tensor(b + "attn_output.weight", hf[p + "self_attn.o_proj.weight"])
        w.add_tensor(b + "ffn_norm.weight", hf[p + "post_attention_layernorm.weight"])
        w.add_tensor(b + "ffn_gate.weight", hf[p + "mlp.gate_proj.weight"])
        w.add_tensor(b + "ffn_up.weight", hf[p + "mlp.up_proj.weight"])
        w.add_tensor(b + "ffn_down.weight", hf[p + "mlp.down_proj.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": n_vocab,
        "hidden_size": hidden,
        "intermediate_size": ff,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "head_dim": hidden // heads,
        "max_position_embeddings": ctx,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": EOS_ID,
        "eos_token_id": EOS_ID,
        "pad_token_id": EOS_ID,
        "torch_dtype": "float32",
    }
    special = {"bos_token_id": EOS_ID, "eos_token_id": EOS_ID, "pad_token_id": EOS_ID}
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": SPECIALS[0],
        "eos_token": SPECIALS[0],
        "pad_token": SPECIALS[0],
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "model_max_length": ctx,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    (hf_dir / "config.json").write_text(json.dumps(config, indent=1))
    (hf_dir / "generation_config.json").write_text(json.dumps(special))
    (hf_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=1))
    save_file(hf, str(hf_dir / "model.safetensors"), metadata={"format": "pt"})

    return TinyModel(
        gguf=gpath,
        hf_dir=hf_dir,
        vocab_size=n_vocab,
        printable_ids=tuple(int(i) for i in np.flatnonzero(good)),
        eos_id=EOS_ID,
        eos=eos,
        max_position_embeddings=ctx,
    )


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Write a tiny random Llama (GGUF + HF folder).")
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--eos", choices=["never", "sometimes", "always"], default="never")
    a = ap.parse_args()
    m = make_tiny_model(a.outdir, eos=a.eos)
    print(json.dumps({"gguf": str(m.gguf), "hf_dir": str(m.hf_dir), "vocab": m.vocab_size}))
