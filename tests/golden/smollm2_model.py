"""The real SmolLM2 GGUF file, as the SmolLM2 generators find and identify it.

gen_smollm2_golden.py and gen_smollm2_fixture.py both read the file that
tools/fetch-smollm2.sh fetches, from the place the C++ tests look (FITGRAD_SMOLLM2, else
FITGRAD_CACHE or ~/.cache/fitgrad), record its SHA-256 next to their output, and tokenize
with Hugging Face `tokenizers` set up as SmolLM's tokenizer.json is. This module holds
that shared part; it needs no torch, so the fixture generator runs without it.
"""
import argparse
import hashlib
import os

MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def parse_args():
    """--model (default: where the tests look) and --out (default: this folder)."""
    ap = argparse.ArgumentParser()
    cache = os.environ.get("FITGRAD_CACHE") or os.path.expanduser("~/.cache/fitgrad")
    ap.add_argument("--model", default=os.environ.get("FITGRAD_SMOLLM2") or
                    os.path.join(cache, MODEL_NAME))
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    return ap.parse_args()


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def smollm2_tokenizer(tokens, merges, types):
    """`tokenizers` BPE over GGUF token, merge ("a b") and token-type lists: SmolLM's digit
    splitting, then GPT-2's byte-level pre-tokenizer; control tokens (type 3) are special."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)},
                               [tuple(m.split(" ", 1)) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([t for t, ty in zip(tokens, types) if ty == 3])
    return tok
