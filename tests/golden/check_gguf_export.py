#!/usr/bin/env python3
"""Checks a GGUF file that `fitgrad export -o OUT.gguf` wrote (Note [GGUF files written] in
apps/export_gguf.cpp) against the checkpoint it came from, with the `gguf` package and
transformers' own GGUF loader. Not run by CI.

    /work/venv-hf/bin/python tests/golden/check_gguf_export.py OUT.gguf CHECKPOINT TOKENIZER_JSON

The `gguf` package must read every tensor; transformers must load the file
(from_pretrained(gguf_file=...)) and give the checkpoint's logits (the checkpoint loaded by
transformers too) within --tol of their scale; the tokenizer transformers builds from the
file must encode the fixture texts of tests/golden/hf_tokenizers/spm_fixtures.json (those
without added tokens, whose flags GGUF cannot hold) to the ids the original tokenizer.json
gives. transformers 4.46 ignores rope_freqs.weight, so a Llama 3
scaled model differs there by the scaling's effect (the file itself carries it). Exits 1 on
any difference.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from gguf import GGUFReader  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("gguf")
    p.add_argument("checkpoint")
    p.add_argument("tokenizer_json")
    p.add_argument("--tol", type=float, default=1e-5)
    a = p.parse_args()
    reader = GGUFReader(a.gguf)
    print(f"gguf package: {len(reader.tensors)} tensors, "
          f"{len(reader.fields)} fields")
    folder, name = os.path.split(os.path.abspath(a.gguf))
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name,
                                                 torch_dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    orig = Tokenizer.from_file(a.tokenizer_json)
    texts = json.load(open(os.path.join(HERE, "hf_tokenizers", "spm_fixtures.json")))["texts"]
    # Added tokens' flags (single_word, normalized) have no GGUF key: texts without them.
    texts = [t for t in texts if "<" not in t and "[" not in t and t.strip() and
             "xyzzy" not in t and "plugh" not in t]
    differ = [t for t in texts if tok.encode(t, add_special_tokens=False) !=
              orig.encode(t, add_special_tokens=False).ids]
    same = len(texts) - len(differ)
    for t in differ:
        print(f"  differs: {t[:50]!r}")
    print(f"tokenizer from the file: the same ids on {same} of {len(texts)} texts")
    ref = AutoModelForCausalLM.from_pretrained(a.checkpoint, torch_dtype=torch.float32).eval()
    ids = torch.tensor([orig.encode(texts[0]).ids])
    with torch.no_grad():
        got, want = model(ids).logits, ref(ids).logits
    err = float((got - want).abs().max() / want.abs().max())
    print(f"logits: max |gguf - checkpoint| / max |checkpoint| = {err:.3e} (tol {a.tol})")
    ok = same == len(texts) and err <= a.tol
    print("OK" if ok else "DIFFERENT")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
