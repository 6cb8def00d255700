#!/usr/bin/env python3
"""The host memory of loading a multi-GB sharded Hugging Face folder (issue "Bring your own
model", deliverable 1: shards stream tensor by tensor, so the peak is about one tensor above
the model).

Writes a random LlamaForCausalLM (hidden 1536, intermediate 4096, 24 layers, 16 heads on 4
kv heads, vocab 50257 so that GPT-2's tokenizer serves, untied: 748M parameters) with transformers' save_pretrained in bf16,
in 300 MB shards with model.safetensors.index.json, to FOLDER (kept for reruns), then runs
`fitgrad eval --model FOLDER` on one 64-token window under /usr/bin/time -v, in f32 (each
bf16 tensor widened as it loads) and in bf16, and prints the peak resident set beside the
model's own bytes and its largest tensor.

    $REFERENCE_ENV/bin/python bench/hf_folder_load.py [--fitgrad build/fitgrad] [--folder DIR]

Needs transformers and torch: the reference environment bench/reference-env.sh makes
(REFERENCE_ENV defaults to .reference-env/ at the checkout's root).
"""

import argparse
import json
import os
import re
import subprocess
import tempfile

HIDDEN, INTER, LAYERS, HEADS, KV, VOCAB = 1536, 4096, 24, 16, 4, 50257


def make_folder(folder):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    if os.path.exists(os.path.join(folder, "model.safetensors.index.json")):
        return
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER,
                      num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                      num_key_value_heads=KV, max_position_embeddings=2048,
                      tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device("cpu"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(folder, max_shard_size="300MB", safe_serialization=True)


def peak_rss(cmd):
    out = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stdout + out.stderr)
    kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr).group(1))
    return kb * 1024, out.stdout.strip().splitlines()[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fitgrad", default="build/fitgrad")
    parser.add_argument("--folder", default=os.path.join(tempfile.gettempdir(), "hf_folder_748m"))
    args = parser.parse_args()
    make_folder(args.folder)
    index = json.load(open(os.path.join(args.folder, "model.safetensors.index.json")))
    shards = sorted(set(index["weight_map"].values()))
    files = sum(os.path.getsize(os.path.join(args.folder, s)) for s in shards)
    params = files // 2  # bf16
    largest = VOCAB * HIDDEN
    text = os.path.join(args.folder, "eval.txt")
    with open(text, "w") as f:
        f.write("It is a truth universally acknowledged. " * 20)
    print(f"folder: {len(shards)} shards, {files / 2**30:.2f} GiB bf16, {params / 1e6:.0f}M "
          f"parameters, largest tensor {largest / 1e6:.1f}M")
    for dtype, size in [("f32", 4), ("bf16", 2)]:
        rss, line = peak_rss([args.fitgrad, "eval", "--model", args.folder, "--data", text,
                              "--seq_len", "64", "--max_windows", "1", "--dtype", dtype])
        model = params * size
        print(f"RESULT dtype={dtype} peak_rss_gib={rss / 2**30:.2f} model_gib={model / 2**30:.2f} "
              f"above_model_mib={(rss - model) / 2**20:.0f} "
              f"largest_tensor_mib={largest * size / 2**20:.0f}")
        print("  " + line)


if __name__ == "__main__":
    main()
