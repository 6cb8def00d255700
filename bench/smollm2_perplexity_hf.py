"""The transformers arm of bench/smollm2_perplexity and `fitgrad eval` (issues 30, 45 and 60).

It scores the same windows as the C++ program (Note [SmolLM2 perplexity slice] in
bench/smollm2_perplexity.cpp): the held-out slice is the last 5% of the corpus's bytes, from
the first line start at or after byte floor(0.95 * size). The slice is tokenized on its own,
with no BOS. Window w feeds tokens [512 w, 512 w + 512) and scores the next-token predictions
of tokens [512 w + 1, 512 w + 513). The model is the Hugging Face folder `fitgrad export`
writes from the GGUF fitgrad reads (tools/fetch-smollm2.sh), loaded in f32 and cast to DTYPE
(f32 or bf16); its head is the token embedding (tied), as in the GGUF. THREADS defaults to 1,
as the C++ program's comparison ran; only the windows are timed. `fitgrad eval --data FILE
--seq_len 512` scores the same windows of a file holding the slice (heldout_slice here).

  $REFERENCE_ENV/bin/python bench/smollm2_perplexity_hf.py WINDOWS MODEL_FOLDER [CORPUS
         [DTYPE [THREADS [BATCH]]]]

BATCH windows go through one forward (default 1), as `fitgrad eval --batch_size`. CORPUS
defaults to data/assets/austen.txt. It runs in the reference environment
(bench/reference-env.sh: transformers 5.23, torch 2.15); bench/smollm2_inference_runs.sh eval
runs it alternately with `fitgrad eval`. CI does not run it.
"""
import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402

PACKAGES = ("torch", "transformers")


def heldout_slice(corpus):
    """The bytes of the held-out slice of corpus (see the docstring)."""
    data = open(corpus, "rb").read()
    start = (len(data) * 95) // 100
    while 0 < start < len(data) and data[start - 1] != ord("\n"):
        start += 1
    return data[start:]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("windows", nargs="?", type=int, default=16)
    p.add_argument("model", nargs="?", help="the Hugging Face folder `fitgrad export` writes")
    p.add_argument("corpus", nargs="?", default="data/assets/austen.txt")
    p.add_argument("dtype", nargs="?", choices=["f32", "bf16"], default="f32")
    p.add_argument("threads", nargs="?", type=int, default=1)
    p.add_argument("batch", nargs="?", type=int, default=1)
    a = p.parse_args()
    if not a.model or not os.path.isfile(os.path.join(a.model, "config.json")):
        sys.exit(f"{a.model}: not a Hugging Face model folder (no config.json); write one with "
                 f"`build/fitgrad export`")
    reference_env.require(PACKAGES)
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(a.threads)
    print(f"config: {reference_env.torch_line()}, transformers {transformers.__version__}",
          flush=True)
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[a.dtype]
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32).to(dtype)
    model.eval()
    ids = tok(heldout_slice(a.corpus).decode("utf-8"), add_special_tokens=False)["input_ids"]
    if len(ids) < 512 * a.windows + 1:
        sys.exit(f"the slice has {len(ids)} tokens, fewer than {a.windows} windows need")
    total, count = 0.0, 0
    began = time.perf_counter()
    with torch.no_grad():
        for w0 in range(0, a.windows, a.batch):
            ws = range(w0, min(a.windows, w0 + a.batch))
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
          f"{torch.get_num_threads()} threads): {a.windows} "
          f"windows x 512 tokens = {count} scored tokens, mean NLL {mean:.4f} nats/token, "
          f"perplexity {math.exp(mean):.3f}, {seconds:.1f} s ({count / seconds:.1f} tokens/s)")
    print(f"RESULT arm=transformers dtype={a.dtype} windows={a.windows} batch={a.batch} "
          f"scored_tokens={count} mean_nll={mean:.4f} seconds={seconds:.3f} "
          f"tokens_per_s={count / seconds:.1f} threads={a.threads}", flush=True)


if __name__ == "__main__":
    main()
