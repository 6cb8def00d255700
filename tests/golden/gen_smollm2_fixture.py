#!/usr/bin/python3
"""A small committed slice of the real SmolLM2-135M-Instruct Q4_1 GGUF, with references
from ggml's `gguf` package and Hugging Face's `tokenizers` (issue 16, items 2 and 3), so
that the GGUF decoding and tokenizer checks run on a fresh clone without the 93 MB model.

How to run (CI does NOT run this; it only reads the committed files):

    bash tools/fetch-smollm2.sh                        # the model, into ~/.cache/fitgrad
    /usr/bin/python3 -m venv /tmp/venv-gguf
    /tmp/venv-gguf/bin/pip install gguf==0.19.0 tokenizers==0.23.3 numpy==2.4.6
    /tmp/venv-gguf/bin/python tests/golden/gen_smollm2_fixture.py [--model PATH] [--out DIR]

The model path defaults to $FITGRAD_SMOLLM2, else $FITGRAD_CACHE or ~/.cache/fitgrad. The
output is deterministic: the same model and package versions rewrite identical bytes.

What it writes (the .gtb format is tests/golden/golden_file.h):

smollm2_slice.gguf, written by gguf's GGUFWriter:
  * tensors q4_1_blocks (16, 32) and q8_0_blocks (16, 32): one real block per row, its
    raw bytes cut from the model (meta "q4_1_sources" / "q8_0_sources" say from which
    tensor and block, and why: the extremes of the scale d and the min m over all the
    model's blocks of that type, the first blocks of a tensor, and evenly spaced ones);
  * the tokenizer keys (model "gpt2", pre "smollm", bos/eos/padding ids) with a slice of
    the vocabulary: the control tokens, every single-character token (the byte
    alphabet), the tokens that the BPE merges of the texts below build and those of the
    model's first FIRST_MERGES merges (more merges for a faulty tokenizer to misapply),
    with exactly the merges that build them, in the model's rank order. BPE applies the
    lowest-ranked applicable merge at each step, and every merge applied to these texts
    is in the slice, so the slice tokenizes them like the full vocabulary (asserted).
smollm2_slice.gtb:
  q4_1_values, q8_0_values  f32 (16, 32)  gguf.quants.dequantize of those blocks
  text_ids.NN    i64  text NN tokenized by `tokenizers` on the slice (slice ids)
  full_ids.NN    i64  the same text tokenized on the full vocabulary (the model's ids)
  slice_to_full  i64  the model's id of each slice token
  meta: texts, block sources, model SHA-256, package versions.
smollm2_tensors.gtb (for GgufSmolLM2.EveryTensorDequantizes, which reads the model):
  <tensor name>         f32 (3, 32)  gguf's decode of values [32 b, 32 b + 32) for the
                                     3 sampled blocks b: first, last, one in between
  <tensor name>.blocks  i64 (3,)     those b
  meta "checksums": per tensor, sum_i bits(x_i) * (2 i + 1) mod 2^64 over the whole
  decode in file order (bits: the f32 bit pattern), as 16 hex digits.

The tokenizer is set up as gen_smollm2_golden.py sets it up: SmolLM's pre-tokenizer (each
digit alone, then byte-level GPT-2 splitting) and the control tokens as special tokens.
"""

import os
import sys
import zlib
from importlib.metadata import version

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import quants

from gtb_numpy import write_gtb
from smollm2_model import MODEL_NAME, parse_args, sha256, smollm2_tokenizer

TEXTS = [
    "<|im_start|>user\nWhat is the capital of France? Name 3 famous places there."
    "<|im_end|>\n<|im_start|>assistant\n",
    "It is a truth universally acknowledged, that a single man in possession of a good "
    "fortune, must be in want of a wife.",
    "Tabs\tand\nnewlines,  double  spaces, caf\u00e9, \u20ac42 and 'quotes' it's",
    "12345 and 3.14159, in 2024: 1,000,000 people.",
    "I'm sure you'll agree we've done it. They'd said DON'T, it's OURS.",
    'def main():\n    return {"key": [1, 2, 3]}  # comment\n',
    "The quick brown fox jumps over the lazy dog!!! ??? ...",
    "na\u00efve fa\u00e7ade \u2014 \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8, "
    "emoji \U0001f642\U0001f44d, \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
    "   leading and trailing   \n\n\n\tend  ",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|endoftext|>",
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct?x=1&y=2 mail@example.com",
]
BLOCKS = 16  # per quantized type in the slice
FIRST_MERGES = 1000  # of the model's merges, kept in the slice besides those the texts use


def field(reader, key):
    return reader.fields[key].contents()


# ---------------------------------------------------------------------------- blocks


def all_blocks(reader, qtype):
    """Every block of that type: (bytes (N, type_size), [(tensor name, first block)])."""
    size = gguf.GGML_QUANT_SIZES[qtype][1]
    parts, starts, n = [], [], 0
    for t in reader.tensors:
        if t.tensor_type == qtype:
            parts.append(np.asarray(t.data).reshape(-1, size))
            starts.append((t.name, n))
            n += len(parts[-1])
    return np.concatenate(parts), starts


def locate(starts, i):
    name, first = [s for s in starts if s[1] <= i][-1]
    return name, i - first


def pick_blocks(reader, qtype):
    """BLOCKS block indices with the reason for each: extremes first, then spread out."""
    blocks, starts = all_blocks(reader, qtype)
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)[:, 0]
    picks = {0: "the first block", 1: "the second block"}
    nonzero = np.flatnonzero(d != 0)
    picks.setdefault(int(np.argmax(d)), "the largest scale d")
    picks.setdefault(int(nonzero[np.argmin(np.abs(d[nonzero]))]), "the smallest nonzero |d|")
    if qtype == Q.Q4_1:
        m = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)[:, 0]
        picks.setdefault(int(np.argmin(m)), "the most negative min m")
        picks.setdefault(int(np.argmax(m)), "the largest min m")
        picks.setdefault(int(np.argmin(np.abs(m))), "the smallest |m|")
    k = 1
    while len(picks) < BLOCKS:
        picks.setdefault(k * len(blocks) // BLOCKS, "evenly spaced")
        k += 1
    order = list(picks)
    sources = [dict(zip(("tensor", "block"), locate(starts, i)), why=picks[i]) for i in order]
    return blocks[order], sources


# ---------------------------------------------------------------------------- tokenizer


def vocab_slice(tokens, merges, types, used_ids):
    """Kept token ids (sorted) and merge indices: base tokens plus the merge trees of
    used_ids. Each non-base token is made by exactly one merge (asserted)."""
    made_by = {}
    for i, m in enumerate(merges):
        assert "".join(m.split(" ", 1)) not in made_by
        made_by["".join(m.split(" ", 1))] = i
    ids = {t: i for i, t in enumerate(tokens)}
    keep = {i for i, t in enumerate(tokens) if types[i] == 3 or len(t) == 1}
    keep_merges, todo = set(), list(used_ids)
    while todo:
        i = todo.pop()
        if tokens[i] in made_by and made_by[tokens[i]] not in keep_merges:
            keep_merges.add(made_by[tokens[i]])
            todo += [ids[p] for p in merges[made_by[tokens[i]]].split(" ", 1)]
        keep.add(i)
    return sorted(keep), sorted(keep_merges)


# ---------------------------------------------------------------------------- main


def main():
    args = parse_args()
    assert sys.byteorder == "little", "the formats are little-endian"

    sha = sha256(args.model)
    r = gguf.GGUFReader(args.model)
    meta = {"model": MODEL_NAME, "model_sha256": sha, "gguf": version("gguf"),
            "tokenizers": version("tokenizers"), "numpy": np.__version__, "texts": TEXTS}
    refs = {}

    writer = gguf.GGUFWriter(os.path.join(args.out, "smollm2_slice.gguf"), "llama")
    for qtype, name in ((Q.Q4_1, "q4_1"), (Q.Q8_0, "q8_0")):
        blocks, meta[name + "_sources"] = pick_blocks(r, qtype)
        writer.add_tensor(name + "_blocks", blocks, raw_dtype=qtype)
        refs[name + "_values"] = quants.dequantize(blocks, qtype)

    tokens = list(field(r, "tokenizer.ggml.tokens"))
    merges = list(field(r, "tokenizer.ggml.merges"))
    types = list(field(r, "tokenizer.ggml.token_type"))
    assert field(r, "tokenizer.ggml.pre") == "smollm"
    full = smollm2_tokenizer(tokens, merges, types)
    full_ids = [full.encode(t).ids for t in TEXTS]
    id_of = {t: i for i, t in enumerate(tokens)}
    used = {i for ids in full_ids for i in ids}
    used |= {id_of["".join(m.split(" ", 1))] for m in merges[:FIRST_MERGES]}
    keep, keep_merges = vocab_slice(tokens, merges, types, used)
    new_id = {old: new for new, old in enumerate(keep)}
    s_tokens = [tokens[i] for i in keep]
    s_merges = [merges[i] for i in keep_merges]
    s_types = [types[i] for i in keep]
    sliced = smollm2_tokenizer(s_tokens, s_merges, s_types)
    for k, (text, ids) in enumerate(zip(TEXTS, full_ids)):
        got = sliced.encode(text).ids
        assert got == [new_id[i] for i in ids], f"the slice tokenizes text {k} differently"
        assert sliced.decode(got, skip_special_tokens=False) == text, f"text {k} round trip"
        refs[f"text_ids.{k:02d}"] = np.array(got, dtype=np.int64)
        refs[f"full_ids.{k:02d}"] = np.array(ids, dtype=np.int64)
    refs["slice_to_full"] = np.array(keep, dtype=np.int64)
    print(f"vocabulary slice: {len(s_tokens)} tokens, {len(s_merges)} merges")

    writer.add_tokenizer_model(field(r, "tokenizer.ggml.model"))
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(s_tokens)
    writer.add_token_types(s_types)
    writer.add_token_merges(s_merges)
    for key in ("bos", "eos", "padding"):
        writer.add_uint32(f"tokenizer.ggml.{key}_token_id",
                          new_id[int(field(r, f"tokenizer.ggml.{key}_token_id"))])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    write_gtb(os.path.join(args.out, "smollm2_slice.gtb"), refs, meta)

    samples, checksums = {}, {}
    for t in r.tensors:
        x = np.ascontiguousarray(quants.dequantize(t.data, t.tensor_type), np.float32).ravel()
        weights = np.arange(1, 2 * x.size, 2, dtype=np.uint64)
        checksums[t.name] = f"{int((x.view(np.uint32).astype(np.uint64) * weights).sum()):016x}"
        n = x.size // 32
        b = np.array([0, 1 + zlib.crc32(t.name.encode()) % (n - 2), n - 1], dtype=np.int64)
        samples[t.name] = x.reshape(n, 32)[b]
        samples[t.name + ".blocks"] = b
    write_gtb(os.path.join(args.out, "smollm2_tensors.gtb"), samples,
              {"model": MODEL_NAME, "model_sha256": sha, "gguf": version("gguf"),
               "numpy": np.__version__, "checksums": checksums})
    print("wrote smollm2_slice.gguf, smollm2_slice.gtb, smollm2_tensors.gtb to", args.out)


if __name__ == "__main__":
    main()
