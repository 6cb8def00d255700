"""The Hugging Face arm of bench/smollm2_perplexity (issue 30, item 5).

It scores the same windows as the C++ program (Note [SmolLM2 perplexity slice] in
bench/smollm2_perplexity.cpp): the held-out slice is the last 5% of the corpus's bytes, from
the first line start at or after byte floor(0.95 * size). The slice is tokenized on its own,
with no BOS. Window w feeds tokens [512 w, 512 w + 512) and scores the next-token predictions
of tokens [512 w + 1, 512 w + 513). The model is the same Q4_1 GGUF, which transformers
dequantizes to f32 when it loads it (and casts to DTYPE, f32 or bf16). The GGUF has no
output.weight: its head is the token embedding (tied), and transformers, left alone, would
build a random head. THREADS defaults to 1, as the C++ program's comparison ran; only the
windows are timed. `fitgrad eval --data FILE --seq_len 512` scores the same windows of a file
holding the slice (issue 45: bf16, 2 threads).

  python bench/smollm2_perplexity_hf.py [WINDOWS [MODEL [CORPUS [DTYPE [THREADS [BATCH]]]]]]

BATCH windows go through one forward (default 1), as `fitgrad eval --batch_size`.

Needs transformers (4.46.3 works on Debian's PyTorch 1.13), gguf and accelerate from PyPI,
e.g. in a venv made with --system-site-packages. CI does not run it.
"""
import math
import os
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    windows = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    cache = os.environ.get("FITGRAD_CACHE", os.path.expanduser("~/.cache/fitgrad"))
    model_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        cache, "SmolLM2-135M-Instruct.Q4_1.gguf")
    corpus = sys.argv[3] if len(sys.argv) > 3 else "data/assets/austen.txt"
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[sys.argv[4] if len(sys.argv) > 4
                                                           else "f32"]
    torch.set_num_threads(int(sys.argv[5]) if len(sys.argv) > 5 else 1)
    batch = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    folder, name = os.path.split(os.path.abspath(model_path))
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32,
                                                 tie_word_embeddings=True).to(dtype)
    model.eval()
    data = open(corpus, "rb").read()
    start = (len(data) * 95) // 100
    while 0 < start < len(data) and data[start - 1] != ord("\n"):
        start += 1
    ids = tok(data[start:].decode("utf-8"), add_special_tokens=False)["input_ids"]
    if len(ids) < 512 * windows + 1:
        sys.exit(f"the slice has {len(ids)} tokens, fewer than {windows} windows need")
    total, count = 0.0, 0
    began = time.perf_counter()
    with torch.no_grad():
        for w0 in range(0, windows, batch):
            ws = range(w0, min(windows, w0 + batch))
            x = torch.tensor([ids[512 * w:512 * w + 512] for w in ws])
            y = torch.tensor([ids[512 * w + 1:512 * w + 513] for w in ws])
            logits = model(x).logits.float()
            nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                    y.reshape(-1), reduction="sum").item()
            print(f"windows {w0}-{ws[-1]}: mean NLL {nll / (512 * len(ws)):.4f}")
            total += nll
            count += 512 * len(ws)
    seconds = time.perf_counter() - began
    mean = total / count
    print(f"transformers {transformers.__version__} on torch {torch.__version__} ({dtype}, "
          f"{torch.get_num_threads()} threads): {windows} "
          f"windows x 512 tokens = {count} scored tokens, mean NLL {mean:.4f} nats/token, "
          f"perplexity {math.exp(mean):.3f}, {seconds:.1f} s ({count / seconds:.1f} tokens/s)")


if __name__ == "__main__":
    main()
