#!/usr/bin/env python3
"""Golden data pinning a Hugging Face model folder as transformers writes it: a tiny random
Llama 3.1-style model (rope_scaling llama3), with --family qwen3 a tiny Qwen3 (per-head q/k
RMSNorm, tied head), with --family mistral a tiny Mistral (sliding window), or with
--family phi3 a tiny Phi-3 (fused qkv_proj and gate_up_proj, longrope, sliding window), or
with --family gemma2 / gemma3 a tiny Gemma 2 / Gemma 3 (Note [Gemma blocks] in nn/decoder.cpp),
saved in shards, with its logits, greedy tokens, and one training step's loss and gradients.

How to run (CI does NOT run this; it only reads the committed tests/golden/hf_llama31_tiny/).
transformers 4.46.3 in a venv that sees Debian's python3-torch, or with PyPI's torch (the
committed files were written with PyPI's torch 2.15 on the CPU, transformers 4.46.3):

    /usr/bin/python3 -m venv --system-site-packages /tmp/hfvenv
    /tmp/hfvenv/bin/pip install transformers==4.46.3 safetensors numpy
    /tmp/hfvenv/bin/python tests/golden/gen_hf_folder_golden.py [--out DIR]

--family qwen3 (tests/golden/hf_qwen3_tiny/) needs transformers >= 4.51 (the committed files:
4.51.3 with tokenizers 0.21.1 over the same torch): Qwen3Config with vocab 256, hidden 32,
intermediate 64, 2 layers, 4 heads on 2 kv heads, head_dim 16 (so q_proj is 32 -> 64),
rms_norm_eps 1e-6, rope_theta 1e6, tied embeddings; otherwise as below.

--family llama-dynamic and --family llama-yarn (tests/golden/hf_llama_dynamic_tiny/,
hf_llama_yarn_tiny/, transformers 4.46.3): the llama31 model with max_position_embeddings 32
(so the 40 positions pass it and the 18 greedy ones do not) and rope_scaling dynamic (factor 2)
or yarn (factor 4, beta_fast 32, beta_slow 1; transformers 4.46 takes max_position_embeddings
as yarn's original context).

--family gemma2 (tests/golden/hf_gemma2_tiny/, transformers 4.46.3) and --family gemma3
(tests/golden/hf_gemma3_tiny/, transformers 4.51.3, Gemma3ForCausalLM, model_type
gemma3_text): vocab 256, hidden 32, intermediate 64, 2 layers (layer 0 slides, layer 1 is
global), 4 heads on 2 kv heads, head_dim 8, query_pre_attn_scalar 16, rms_norm_eps 1e-6,
sliding_window 7, tied head, initializer_range 0.3 so that the soft caps bite: Gemma 2 with
attn_logit_softcapping 1.0 and final_logit_softcapping 3.0; Gemma 3 with
sliding_window_pattern 2, rope_theta 1e6 with linear scaling (factor 8) on the global layer
and rope_local_base_freq 10000 on the sliding one. The norm weights are set to
0.1 N(0, 1) (Gemma's norms scale by 1 + w). --family gemma3-mm
(tests/golden/hf_gemma3_mm_tiny/, transformers 4.51.3): that Gemma 3 text model inside a
Gemma3ForConditionalGeneration with a one-layer SigLIP vision tower (hidden 16, 28 px images of
14 px patches, 4 tokens per image), saved as the Hub's Gemma 3 folders are (model_type gemma3,
text_config holding only the keys that differ from Gemma3TextConfig's defaults,
language_model.* and vision_tower.* weights); logits and gradients of text input, the gradients
under the text model's names.

--family qwen2 (tests/golden/hf_qwen2_tiny/, transformers 4.46.3): Qwen2Config with vocab 256,
hidden 32, intermediate 64, 2 layers, 4 heads on 2 kv heads, rms_norm_eps 1e-6, rope_theta
1e6, tied head, the q/k/v biases (zero at transformers' init) set to 0.1 N(0, 1) so that
loading them matters.

--family mistral (tests/golden/hf_mistral_tiny/, transformers 4.46.3): MistralConfig with
vocab 256, hidden 32, intermediate 64, 2 layers, 4 heads on 2 kv heads, rms_norm_eps 1e-5,
rope_theta 1e6, sliding_window 7 (so each of the 40 positions, and each greedy step past the
7th token, sees only itself and the 6 before it: eager attention's mask j > i - 7), untied
head; otherwise as below.

--family phi3 (tests/golden/hf_phi3_tiny/, transformers 4.46.3): Phi3Config with vocab 256,
hidden 32, intermediate 64, 2 layers, 4 heads on 2 kv heads (head dim 8), rms_norm_eps 1e-5,
rope_theta 10000, max_position_embeddings 128, original_max_position_embeddings 32,
rope_scaling longrope with short_factor [1, 1.5, 2, 4] and long_factor [1, 3, 9, 27] (so the
40-position logits and gradients take the long list, the greedy steps, 18 positions at most,
the short one; attention factor sqrt(1 + ln 4 / ln 32)), sliding_window 20, untied head;
otherwise as below.

Writes DIR (default tests/golden/hf_llama31_tiny/):
  model/  LlamaForCausalLM.save_pretrained(max_shard_size="48KB", safe_serialization=True):
          config.json, generation_config.json, model-0000k-of-0000n.safetensors and
          model.safetensors.index.json. float32. vocab 256, hidden 32, intermediate 64,
          2 layers, 4 heads on 2 kv heads (head dim 8), max_position_embeddings 1024,
          rms_norm_eps 1e-5, rope_theta 500000, rope_scaling llama3 (factor 8, low 1,
          high 4, original_max_position_embeddings 256: of the four frequency pairs, pair 0
          is kept, pair 1 lies between the two wavelengths and pairs 2-3 are divided by 8),
          untied lm_head, eager attention. Weights: transformers' init (N(0, 0.02), seed
          MODEL_SEED); the RMSNorm weights set to 1 + 0.1 N(0, 1) so that loading them matters.
  golden.gtb (tests/golden/golden_file.h's format):
      input_ids   i64 (2, 40)       uniform ids in [0, 256), seed INPUT_SEED
      logits      f32 (2, 40, 256)  model(input_ids), positions 0..39
      prompt      i64 (1, 6)        the first 6 ids of row 0
      greedy      i64 (12)          12 greedy tokens after `prompt`, each from a full forward
                                    over prompt + the tokens so far (no cache)
      loss        f32 ()            mean cross-entropy of model(ids[:, :-1]) against ids[:, 1:]
      grad.<name> f32               d loss / d parameter, for every parameter (HF names)
      meta: versions, the config, f64_err (max |f32 - f64| / max |f64| of the logits, the
      same model in float64), the top-2 margins of the greedy steps.
"""

import argparse
import os
import shutil
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gtb_numpy import write_gtb  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "hf_llama31_tiny")
MODEL_SEED, NORM_SEED, INPUT_SEED = 31, 32, 33
THREADS = 2
BATCH, SEQ, PROMPT, NEW = 2, 40, 6, 12


def config(family):
    common = dict(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                  max_position_embeddings=1024, rms_norm_eps=1e-6, query_pre_attn_scalar=16,
                  sliding_window=7, tie_word_embeddings=True, initializer_range=0.3,
                  hidden_activation="gelu_pytorch_tanh", bos_token_id=1, eos_token_id=2,
                  pad_token_id=0)
    if family == "gemma2":
        from transformers import Gemma2Config
        return Gemma2Config(attn_logit_softcapping=1.0, final_logit_softcapping=3.0,
                            rope_theta=10000.0, **common)
    if family == "gemma3":
        from transformers import Gemma3TextConfig
        return Gemma3TextConfig(rope_theta=1000000.0, rope_local_base_freq=10000.0,
                                rope_scaling={"rope_type": "linear", "factor": 8.0},
                                sliding_window_pattern=2, **common)
    if family == "gemma3-mm":
        from transformers import Gemma3Config, SiglipVisionConfig
        vision = SiglipVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                    num_attention_heads=2, image_size=28, patch_size=14)
        return Gemma3Config(text_config=config("gemma3").to_dict(),
                            vision_config=vision.to_dict(), mm_tokens_per_image=4,
                            bos_token_id=1, eos_token_id=2, pad_token_id=0)
    if family == "phi3":
        from transformers import Phi3Config
        return Phi3Config(
            vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
            original_max_position_embeddings=32, rms_norm_eps=1e-5, rope_theta=10000.0,
            rope_scaling={"type": "longrope", "short_factor": [1.0, 1.5, 2.0, 4.0],
                          "long_factor": [1.0, 3.0, 9.0, 27.0]},
            sliding_window=20, tie_word_embeddings=False, hidden_act="silu",
            initializer_range=0.02, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    if family == "mistral":
        from transformers import MistralConfig
        return MistralConfig(
            vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
            rms_norm_eps=1e-5, rope_theta=1000000.0, sliding_window=7,
            tie_word_embeddings=False, hidden_act="silu", initializer_range=0.02,
            bos_token_id=1, eos_token_id=2)
    if family == "qwen2":
        from transformers import Qwen2Config
        return Qwen2Config(
            vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
            rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, hidden_act="silu",
            use_sliding_window=False, initializer_range=0.02, bos_token_id=1, eos_token_id=2)
    if family == "qwen3":
        from transformers import Qwen3Config
        return Qwen3Config(
            vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=1024, rms_norm_eps=1e-6, rope_theta=1000000.0,
            tie_word_embeddings=True, hidden_act="silu", attention_bias=False,
            use_sliding_window=False, initializer_range=0.02, bos_token_id=1, eos_token_id=2)
    if family in ("llama-dynamic", "llama-yarn"):
        scaling = ({"rope_type": "dynamic", "factor": 2.0} if family == "llama-dynamic" else
                   {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0})
        return LlamaConfig(
            vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
            rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
            hidden_act="silu", rope_scaling=scaling, bos_token_id=1, eos_token_id=2)
    return LlamaConfig(
        vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
        rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False, hidden_act="silu",
        attention_bias=False, mlp_bias=False, initializer_range=0.02,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 256},
        bos_token_id=1, eos_token_id=2)


def model_class(family):
    if family == "gemma2":
        from transformers import Gemma2ForCausalLM
        return Gemma2ForCausalLM
    if family == "gemma3":
        from transformers import Gemma3ForCausalLM
        return Gemma3ForCausalLM
    if family == "gemma3-mm":
        from transformers import Gemma3ForConditionalGeneration
        return Gemma3ForConditionalGeneration
    if family == "phi3":
        from transformers import Phi3ForCausalLM
        return Phi3ForCausalLM
    if family == "mistral":
        from transformers import MistralForCausalLM
        return MistralForCausalLM
    if family == "qwen2":
        from transformers import Qwen2ForCausalLM
        return Qwen2ForCausalLM
    if family == "qwen3":
        from transformers import Qwen3ForCausalLM
        return Qwen3ForCausalLM
    return LlamaForCausalLM


def build(family):
    torch.manual_seed(MODEL_SEED)
    model = model_class(family)(config(family)).float()
    model.config._attn_implementation = "eager"
    gen = torch.Generator().manual_seed(NORM_SEED)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):  # incl. Qwen3's q_norm and k_norm
                base = 0 if family.startswith("gemma") else 1  # Gemma scales by 1 + w
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):  # Qwen2's q/k/v biases, zero at init
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    return model.eval()


def hub_style_text_config(path):
    """Leaves out of text_config the keys equal to Gemma3TextConfig's defaults, as the Hub's
    Gemma 3 folders do (google/gemma-3-4b-it's text_config has five keys besides model_type)."""
    import json
    from transformers import Gemma3TextConfig
    defaults = Gemma3TextConfig().to_dict()
    with open(path) as f:
        cfg = json.load(f)
    cfg["text_config"] = {k: v for k, v in cfg["text_config"].items()
                          if k == "model_type" or k not in defaults or defaults[k] != v}
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", choices=["llama31", "qwen2", "qwen3", "mistral", "phi3", "gemma2", "gemma3",
                                             "gemma3-mm", "llama-dynamic", "llama-yarn"],
                        default="llama31")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    args.out = args.out or (DEFAULT_OUT if args.family == "llama31" else
                            os.path.join(HERE, f"hf_{args.family.replace('-', '_')}_tiny"))
    torch.set_num_threads(THREADS)
    model = build(args.family)
    cls = model_class(args.family)
    folder = os.path.join(args.out, "model")
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder, max_shard_size="48KB", safe_serialization=True)
    if args.family == "gemma3-mm":
        hub_style_text_config(os.path.join(folder, "config.json"))
    shards = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
    assert len(shards) > 1 and os.path.exists(
        os.path.join(folder, "model.safetensors.index.json")), shards

    # Read back from the folder, as a user's load would.
    model = cls.from_pretrained(folder, torch_dtype=torch.float32,
                                attn_implementation="eager").eval()
    ids = torch.randint(0, 256, (BATCH, SEQ), generator=torch.Generator().manual_seed(INPUT_SEED))
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits
        model64 = cls.from_pretrained(folder, torch_dtype=torch.float64,
                                      attn_implementation="eager").eval()
        logits64 = model64(input_ids=ids, use_cache=False).logits
    f64_err = float((logits.double() - logits64).abs().max() / logits64.abs().max())

    prompt = ids[:1, :PROMPT]
    seq, greedy, margins = prompt, [], []
    with torch.no_grad():
        for _ in range(NEW):
            last = model(input_ids=seq, use_cache=False).logits[0, -1]
            top2 = torch.topk(last.double(), 2).values
            margins.append(float(top2[0] - top2[1]))
            nxt = int(torch.argmax(last))
            greedy.append(nxt)
            seq = torch.cat([seq, torch.tensor([[nxt]])], dim=1)

    model.zero_grad()
    # The forward over ids[:, :-1] (for every family the same as the full forward's first 39
    # positions, except dynamic NTK scaling, whose RoPE base depends on the length).
    out = model(input_ids=ids[:, :-1], use_cache=False).logits
    loss = torch.nn.functional.cross_entropy(out.reshape(-1, 256), ids[:, 1:].reshape(-1))
    loss.backward()
    tensors = {"input_ids": ids.numpy(), "logits": logits.numpy(), "prompt": prompt.numpy(),
               "greedy": np.array(greedy, dtype=np.int64), "loss": loss.detach().numpy()}
    # The multimodal model's gradients under its text model's names (fitgrad's).
    text = model.language_model if args.family == "gemma3-mm" else model
    for name, p in text.named_parameters():
        tensors["grad." + name] = p.grad.numpy()
    meta = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "numpy": np.__version__},
            "config": config(args.family).to_dict(), "shards": shards, "f64_err": f64_err,
            "greedy_margins": margins, "seeds": [MODEL_SEED, NORM_SEED, INPUT_SEED],
            "threads": THREADS}
    write_gtb(os.path.join(args.out, "golden.gtb"), tensors, meta)
    print(f"wrote {folder} ({len(shards)} shards) and golden.gtb; f64_err {f64_err:.2e}, "
          f"loss {float(loss):.6f}, min greedy margin {min(margins):.3e}")


if __name__ == "__main__":
    main()
