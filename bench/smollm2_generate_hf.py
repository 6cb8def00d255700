"""The transformers arm of the SmolLM2 inference comparison (issues 45 and 60).

Greedy decoding of the same prompt as `fitgrad generate --temperature 0`, with a KV cache,
in bf16 or f32 on the CPU: the prompt is one forward (the prefill), then each new token is
one forward of that token with the cache (`past_key_values`), its argmax the next token. That
plain loop of forwards is what generate() runs for greedy search, without its per-token
bookkeeping, so the rate is transformers' best. The model is the Hugging Face folder
`fitgrad export` writes from the GGUF fitgrad reads (tools/fetch-smollm2.sh), loaded in f32 and
cast to --dtype; fitgrad's arm reads the same folder. Prints the decoded text and one
machine-readable line:

  RESULT arm=transformers dtype=... prompt_tokens=... new_tokens=... prefill_ms=...
         decode_tokens_per_s=... threads=... transformers=... torch=...

  $REFERENCE_ENV/bin/python bench/smollm2_generate_hf.py --model FOLDER [--dtype bf16]
         [--max_new_tokens 128] [--threads 2] [--prompt TEXT]

It runs in the reference environment (bench/reference-env.sh: transformers 5.23, torch 2.15);
bench/smollm2_inference_runs.sh generate runs it alternately with fitgrad's arm. CI does not
run it.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402

PACKAGES = ("torch", "transformers")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="the Hugging Face folder `fitgrad export` writes")
    p.add_argument("--prompt", default="It is a truth universally acknowledged, that a single "
                   "man in possession of a good fortune")
    p.add_argument("--max_new_tokens", type=int, default=128)
    p.add_argument("--dtype", choices=["f32", "bf16"], default="bf16")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    reference_env.require(PACKAGES)
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    if not os.path.isfile(os.path.join(a.model, "config.json")):
        sys.exit(f"{a.model}: not a Hugging Face model folder (no config.json); write one with "
                 f"`build/fitgrad export`")
    torch.set_num_threads(a.threads)
    print(f"config: {reference_env.torch_line()}, transformers {transformers.__version__}",
          flush=True)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32).to(dtype)
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
