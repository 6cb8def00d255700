#!/usr/bin/env python3
"""Checks a model folder that `fitgrad export -o DIR` wrote against its source, with
transformers and tokenizers (Note [Model folders written] in apps/export.cpp). Not run by CI.

    /work/venv-hf/bin/python tests/golden/check_hf_folder.py EXPORTED SOURCE [--tol 1e-4]

SOURCE is the folder or the .gguf file the export read. The exported folder must load with
AutoModelForCausalLM.from_pretrained (strict: no missing or unexpected keys) and give the
source's logits on a fixed batch within --tol of the logits' scale (bf16 exports need about
2e-2); when it has a tokenizer.json, `tokenizers` must encode a set of texts to the source
tokenizer's ids (transformers' own, from the folder or the GGUF file), and its
tokenizer_config.json must name the same bos and eos tokens. Exits 1 on any difference.
"""

import argparse
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

TEXTS = ["It is a truth universally acknowledged, that a single man in possession of a good "
         "fortune, must be in want of a wife.", "1234567 digits, 中文, emoji 👍🏽 and <|im_end|>",
         "  spaces\n\nand lines\t"]


def load(source, **kw):
    if source.endswith(".gguf"):
        return os.path.dirname(source), {"gguf_file": os.path.basename(source), **kw}
    return source, kw


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("exported")
    parser.add_argument("source")
    parser.add_argument("--tol", type=float, default=1e-4)
    args = parser.parse_args()
    torch.set_num_threads(2)
    model, info = AutoModelForCausalLM.from_pretrained(
        args.exported, torch_dtype=torch.float32, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    if bad:
        sys.exit(f"loading info not clean: {bad}")
    path, kw = load(args.source, torch_dtype=torch.float32)
    if args.source.endswith(".gguf"):
        # transformers 4.46 does not read a GGUF file's tied head (no output.weight) as tied,
        # and would leave lm_head random.
        kw["tie_word_embeddings"] = model.config.tie_word_embeddings
    reference = AutoModelForCausalLM.from_pretrained(path, **kw)
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (2, 24), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        got = model(input_ids=ids).logits
        want = reference(input_ids=ids).logits
    err = float((got - want).abs().max() / want.abs().max())
    print(f"logits: max |exported - source| / max |source| = {err:.3e} (tol {args.tol})")
    ok = err <= args.tol
    if os.path.exists(os.path.join(args.exported, "tokenizer.json")):
        exported_tok = Tokenizer.from_file(os.path.join(args.exported, "tokenizer.json"))
        path, kw = load(args.source)
        source_tok = AutoTokenizer.from_pretrained(path, **kw)
        hf_tok = AutoTokenizer.from_pretrained(args.exported)
        for text in TEXTS:
            a = exported_tok.encode(text, add_special_tokens=False).ids
            b = source_tok.encode(text, add_special_tokens=False)
            same = a == b
            ok = ok and same
            print(f"tokens {'same' if same else 'DIFFER'}: {len(a)} ids for {text[:30]!r}")
        # The source's roles: a folder's tokenizer says them; for a GGUF file, its
        # tokenizer.ggml.*_token_id keys (transformers 4.46's GGUF tokenizer reports SmolLM2's
        # eos as <|im_start|>, not the file's <|im_end|>).
        roles = {r: getattr(source_tok, r) for r in ["bos_token", "eos_token"]}
        if args.source.endswith(".gguf"):
            import gguf
            reader = gguf.GGUFReader(args.source)
            tokens = reader.fields["tokenizer.ggml.tokens"]
            for role, key in [("bos_token", "bos_token_id"), ("eos_token", "eos_token_id")]:
                field = reader.fields.get("tokenizer.ggml." + key)
                if field is not None:
                    tid = int(field.parts[field.data[0]][0])
                    roles[role] = bytes(tokens.parts[tokens.data[tid]]).decode()
        for role, want in roles.items():
            same = getattr(hf_tok, role) == want
            ok = ok and same
            print(f"{role}: exported {getattr(hf_tok, role)!r}, source {want!r}")
    print("OK" if ok else "MISMATCH")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
