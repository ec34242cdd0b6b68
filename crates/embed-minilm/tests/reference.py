#!/usr/bin/env python3
"""Reference all-MiniLM-L6-v2 embeddings for tests/minilm.rs, computed independently of
the Rust code: a plain numpy BERT forward pass (float64) over `model.safetensors`, with
the `tokenizers` package for word pieces, mean pooling and L2 normalisation as
sentence-transformers does them (max_seq_length 256, from sentence_bert_config.json).

Needs numpy, tokenizers and safetensors (a throwaway venv will do):

    python3 -m venv /var/tmp/minilm-ref-venv
    /var/tmp/minilm-ref-venv/bin/pip install numpy tokenizers safetensors
    /var/tmp/minilm-ref-venv/bin/python crates/embed-minilm/tests/reference.py MODEL_DIR \
        > crates/embed-minilm/tests/reference.json
"""

import json
import math
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

MAX_TOKENS = 256
FIRST_DIMS = 8

# One ordinary English sentence, one Chinese (each character is its own word piece), one
# very short, and one long enough (> 256 word pieces) that truncation decides the result.
LONG = " ".join(
    f"Sample {i}: the ground station logged the rover's wheel current, battery voltage "
    f"and motor temperature while the operator replayed the capture at double speed."
    for i in range(12)
)
SENTENCES = [
    "The cat sits on the mat",
    "今天天气很好，我们去公园散步吧。",
    "hi",
    LONG,
]


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x):
    # The erf form, as BERT's "gelu" (not the tanh approximation).
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


class Bert:
    def __init__(self, model_dir):
        self.cfg = json.loads((model_dir / "config.json").read_text())
        raw = load_file(str(model_dir / "model.safetensors"))
        self.w = {
            (k[len("bert."):] if k.startswith("bert.") else k): v.astype(np.float64)
            for k, v in raw.items()
        }

    def linear(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def ln(self, x, name):
        return layer_norm(
            x, self.w[name + ".weight"], self.w[name + ".bias"], self.cfg["layer_norm_eps"]
        )

    def embed(self, ids):
        """One sequence, unpadded, so no attention mask is needed: the Rust side's
        padding and masking must reproduce exactly this."""
        w, cfg = self.w, self.cfg
        n = len(ids)
        heads = cfg["num_attention_heads"]
        hd = cfg["hidden_size"] // heads
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self.ln(x, "embeddings.LayerNorm")
        for i in range(cfg["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            q, k, v = (
                self.linear(x, p + "attention.self." + t).reshape(n, heads, hd).transpose(1, 0, 2)
                for t in ("query", "key", "value")
            )
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(1, 0, 2).reshape(n, heads * hd)
            x = self.ln(self.linear(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            h = gelu(self.linear(x, p + "intermediate.dense"))
            x = self.ln(self.linear(h, p + "output.dense") + x, p + "output.LayerNorm")
        pooled = x.mean(0)
        return pooled / np.linalg.norm(pooled)


def main():
    model_dir = Path(sys.argv[1])
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_TOKENS)
    bert = Bert(model_dir)

    def embed(text):
        return bert.embed(tok.encode(text).ids)

    # Sanity check of the reference itself before anyone trusts it.
    cat, cat2, bill = embed(SENTENCES[0]), embed("A cat is sitting on a mat"), embed("Quarterly billing invoice")
    assert cat @ cat2 > 0.7, f"paraphrase cosine {cat @ cat2} is too low: the reference is broken"
    assert cat @ bill < 0.3, f"unrelated cosine {cat @ bill} is too high: the reference is broken"
    print(f"sanity: paraphrase {cat @ cat2:.3f}, unrelated {cat @ bill:.3f}", file=sys.stderr)

    vecs = [embed(s) for s in SENTENCES]
    tokens = [len(tok.encode(s, add_special_tokens=True).ids) for s in SENTENCES]
    untruncated = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    untruncated.no_padding()
    untruncated.no_truncation()
    assert len(untruncated.encode(LONG).ids) > MAX_TOKENS, "the long sentence must exercise truncation"
    out = {
        "model": "all-minilm-l6-v2",
        "max_tokens": MAX_TOKENS,
        "sentences": [
            {"text": s, "tokens": t, "first_dims": [round(float(x), 6) for x in v[:FIRST_DIMS]]}
            for s, t, v in zip(SENTENCES, tokens, vecs)
        ],
        "cosines": [
            {"a": i, "b": j, "cosine": round(float(vecs[i] @ vecs[j]), 6)}
            for i in range(len(vecs))
            for j in range(i + 1, len(vecs))
        ],
    }
    json.dump(out, sys.stdout, ensure_ascii=False, indent=2)
    print()


if __name__ == "__main__":
    main()
