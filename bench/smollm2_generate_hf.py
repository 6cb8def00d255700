"""The Hugging Face arm of the SmolLM2 inference comparison (issue 45, item 4).

Greedy decoding of the same prompt as `fitgrad generate --temperature 0`, with a KV cache,
in bf16 or f32 on the CPU: the prompt is one forward (the prefill), then each new token is
one forward of that token with the cache (`past_key_values`), its argmax the next token.
transformers' generate() is not used: on Python 3.11 with Debian's torch 1.13 it imports
torch.distributed, which fails; a plain loop of forwards is what generate() runs for greedy
search. The model is the same Q4_1 GGUF, which transformers dequantizes to f32 when it loads
it, then casts to --dtype; its head is the token embedding (tied), as in fitgrad. Prints the
decoded text and one machine-readable line:

  RESULT arm=transformers dtype=... prompt_tokens=... new_tokens=... prefill_ms=...
         decode_tokens_per_s=... threads=...

  python bench/smollm2_generate_hf.py [--dtype bf16] [--max_new_tokens 128] [--threads 2]
         [--prompt TEXT] [--model GGUF]

Needs transformers (4.46.3), gguf and accelerate from PyPI, e.g. in a venv made with
--system-site-packages. CI does not run it; bench/RESULTS.md gives the fitgrad arm's command beside it.
"""
import argparse
import os
import time

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    cache = os.environ.get("FITGRAD_CACHE", os.path.expanduser("~/.cache/fitgrad"))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--prompt", default="It is a truth universally acknowledged, that a single "
                   "man in possession of a good fortune")
    p.add_argument("--max_new_tokens", type=int, default=128)
    p.add_argument("--dtype", choices=["f32", "bf16"], default="bf16")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    folder, name = os.path.split(os.path.abspath(a.model))
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32,
                                                 tie_word_embeddings=True).to(dtype)
    model.eval()
    ids = tok(a.prompt, add_special_tokens=False)["input_ids"]
    out = []
    with torch.no_grad():
        t0 = time.perf_counter()
        r = model(torch.tensor([ids]), use_cache=True)
        prefill = time.perf_counter() - t0
        t0 = time.perf_counter()
        past, logits = r.past_key_values, r.logits
        for i in range(a.max_new_tokens):
            nxt = int(logits[0, -1].float().argmax())
            out.append(nxt)
            if i + 1 == a.max_new_tokens:
                break
            r = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
            past, logits = r.past_key_values, r.logits
        decode = time.perf_counter() - t0
    print(tok.decode(out))
    print(f"RESULT arm=transformers dtype={a.dtype} prompt_tokens={len(ids)} "
          f"new_tokens={len(out)} prefill_ms={prefill * 1e3:.1f} "
          f"decode_tokens_per_s={len(out) / decode:.2f} threads={a.threads} "
          f"transformers={transformers.__version__} torch={torch.__version__}", flush=True)


if __name__ == "__main__":
    main()
