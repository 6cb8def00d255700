#!/usr/bin/env python3
"""Golden data pinning fitgrad's LoRA to Hugging Face PEFT: a tiny random Llama, two PEFT
adapters and their logits; and a checker that loads a fitgrad-written adapter with PEFT.

How to run (CI does NOT run this; it only reads the committed tests/golden/peft_tiny/).
PEFT and transformers need a throwaway venv that keeps Debian's torch 1.13 (CPU). Install
with --no-deps: Debian's torch calls itself "1.13.0a0", which pip reads as older than
peft's "torch>=1.13.0", so a plain install would pull in a 2 GB torch 2.x:

    /usr/bin/python3 -m venv --system-site-packages /tmp/peftvenv
    /tmp/peftvenv/bin/pip install --no-deps peft==0.13.2 transformers==4.45.2 \
        accelerate==0.34.2 safetensors==0.4.5 huggingface_hub==0.25.2 tokenizers==0.20.3 \
        regex==2024.9.11 tqdm==4.66.5 packaging==24.1 filelock==3.16.1 fsspec==2024.9.0 \
        Jinja2==3.1.4 MarkupSafe==2.1.5   # Jinja2: PEFT's save_pretrained writes a model card
    # generate: rewrites tests/golden/peft_tiny/ (or writes DIR/ with --out DIR)
    /tmp/peftvenv/bin/python tests/golden/gen_peft_golden.py [--out DIR]
    # check an adapter fitgrad saved in PEFT format against the logits fitgrad computed:
    /tmp/peftvenv/bin/python tests/golden/gen_peft_golden.py --check ADAPTER_DIR LOGITS.gtb \
        [--name logits] [--base tests/golden/peft_tiny/base] [--tol 1e-4]

Versions used for the committed files: torch 1.13.0a0 (Debian python3-torch, CPU), numpy
1.24.2, transformers 4.45.2, peft 0.13.2, accelerate 0.34.2, safetensors 0.4.5, Python 3.11.
The script sets HF_HUB_OFFLINE (nothing is fetched from the Hub) and runs torch on 2
threads; the output is deterministic (fixed seeds; adapter_config.json's target_modules
sorted, since PEFT writes a set in hash order).

Generate (default mode) writes tests/golden/peft_tiny/:
  base/config.json, base/model.safetensors
      transformers.LlamaForCausalLM, float32, save_pretrained(safe_serialization=True):
      vocab 256, hidden 64, intermediate 128, 2 layers, 4 heads, 2 kv heads (head_dim 16),
      max_position_embeddings 128, rms_norm_eps 1e-5, rope_theta 10000, untied lm_head,
      silu, no biases, no rope_scaling, eager attention. Weights: transformers' default
      init (N(0, 0.02), seed MODEL_SEED); the RMSNorm weights (all ones by default) are set
      to 1 + 0.1 * N(0, 1) so that loading them matters.
  adapter/adapter_config.json, adapter/adapter_model.safetensors
      get_peft_model with LoraConfig(r=4, lora_alpha=8, lora_dropout=0, all seven
      projections, bias="none", task_type="CAUSAL_LM"); scaling alpha / r = 2.
  adapter_rslora/...
      LoraConfig(r=8, lora_alpha=16, use_rslora=True, q_proj and v_proj only);
      scaling alpha / sqrt(r) = 16 / sqrt(8).
      In both, lora_A is PEFT's own init (kaiming uniform, a=sqrt(5), seed LORA_SEED) and
      every lora_B (zeros in PEFT) is overwritten with 0.05 * N(0, 1) from a torch
      Generator seeded LORA_B_SEED, filled in sorted parameter-name order. README.md, which
      PEFT writes, is removed. base_model_name_or_path is "peft_tiny/base".
  peft_logits.gtb (format: tests/golden/golden_file.h, written by gtb_numpy.write_gtb)
      input_ids            i64 (2, 12)       uniform ids in [0, 256), seed INPUT_SEED
      base_logits          f32 (2, 12, 256)  the base (peft_model.disable_adapter())
      lora_logits          f32 (2, 12, 256)  with adapter/
      lora_merged_logits   f32 (2, 12, 256)  adapter/ after merge_and_unload()
      rslora_logits        f32 (2, 12, 256)  with adapter_rslora/
      rslora_merged_logits f32 (2, 12, 256)  adapter_rslora/ after merge_and_unload()
      All float32, eval mode, use_cache=False, no attention mask (positions 0..11).
      meta: versions, model_config, attn_implementation, lora / rslora (r, lora_alpha,
      use_rslora, target_modules, scaling as PEFT's layers hold it, adapter dir),
      max_abs_diff (base vs adapted, adapted vs merged), f64_err (per logits tensor,
      max|f32 - f64| / max|f64| of the same PEFT model run in float64: the accuracy a
      float32 implementation reaches), seeds, threads.
  After writing, each saved adapter is reloaded with PeftModel.from_pretrained on the saved
  base and must reproduce its stored logits (the same code path as --check).

--check ADAPTER_DIR LOGITS.gtb (or a .safetensors with the same tensors, as
tests/golden/golden_peft_test.cpp leaves in $FITGRAD_PEFT_CHECK_OUT) loads the committed base (--base), then ADAPTER_DIR with
PeftModel.from_pretrained, runs the gtb's "input_ids" and compares with its tensor --name
("logits"); prints the max abs diff and exits 1 above --tol. Loading is strict: the
adapter's safetensors keys must be exactly the keys get_peft_model_state_dict expects for
its adapter_config.json (no missing, no unexpected, same shapes), load_state_dict must
report no unexpected and no missing lora keys, every loaded value must equal the file's,
and any warning PEFT raises while loading is an error.
"""

import argparse
import copy
import json
import math
import os
import shutil
import struct
import sys
import warnings

# Everything is local: never ask the Hub (PEFT looks up base_model_name_or_path's config
# when saving, to decide whether to save embedding layers).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gtb_numpy import write_gtb  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "peft_tiny")
MODEL_SEED, NORM_SEED, LORA_SEED, LORA_B_SEED, INPUT_SEED = 1234, 4321, 2024, 77, 99
THREADS = 2
BATCH, SEQ = 2, 12
B_STD = 0.05
ALL_PROJ = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
ADAPTERS = {  # name -> (directory, LoraConfig kwargs)
    "lora": ("adapter", dict(r=4, lora_alpha=8, target_modules=ALL_PROJ)),
    "rslora": ("adapter_rslora", dict(r=8, lora_alpha=16, use_rslora=True,
                                      target_modules=["q_proj", "v_proj"])),
}


def model_config_kwargs():
    return dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                hidden_act="silu", attention_bias=False, mlp_bias=False, rope_scaling=None,
                initializer_range=0.02)


def read_gtb(path):
    """The .gtb reader (golden_file.h's format): name -> numpy array, and the meta."""
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen].decode())
    assert header.get("format") == "fitgrad-golden", path
    base = 8 + hlen
    out = {}
    for name, e in header["tensors"].items():
        dt = {"f32": "<f4", "i64": "<i8"}[e["dtype"]]
        a = np.frombuffer(raw, dtype=dt, count=e["nbytes"] // np.dtype(dt).itemsize,
                          offset=base + e["offset"])
        out[name] = a.reshape(e["shape"]).copy()
    return out, header.get("meta", {})


def logits_of(model, ids):
    model.eval()
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits


def maxabs(a, b):
    return float((a.double() - b.double()).abs().max())


def scalings(peft_model):
    """The distinct scaling values PEFT's LoRA layers hold for adapter 'default'."""
    vals = {float(m.scaling["default"]) for m in peft_model.modules()
            if hasattr(m, "scaling") and isinstance(m.scaling, dict) and "default" in m.scaling}
    assert len(vals) == 1, vals
    return vals.pop()


def lora_module_names(peft_model):
    return sorted({n.split(".lora_")[0] for n, _ in peft_model.named_parameters() if ".lora_" in n})


def load_adapter_strict(base_dir, adapter_dir):
    """PeftModel.from_pretrained on a fresh base, with every key check described above.
    Returns (model, report lines); raises RuntimeError on any problem."""
    from peft import PeftModel, get_peft_model_state_dict
    from peft.utils.save_and_load import load_peft_weights, set_peft_model_state_dict
    from safetensors import safe_open
    from transformers import LlamaForCausalLM

    problems, report = [], []
    for fn in ("adapter_config.json", "adapter_model.safetensors"):
        if not os.path.isfile(os.path.join(adapter_dir, fn)):
            raise RuntimeError(f"{adapter_dir} has no {fn}")
    base = LlamaForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32,
                                            attn_implementation="eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = PeftModel.from_pretrained(base, adapter_dir, is_trainable=False)
    for w in caught:
        problems.append(f"warning while loading: {w.category.__name__}: {w.message}")

    file_path = os.path.join(adapter_dir, "adapter_model.safetensors")
    with safe_open(file_path, framework="pt") as f:
        file_tensors = {k: f.get_tensor(k) for k in f.keys()}
    # the keys as PEFT saves them (no adapter name) for this adapter_config.json
    expected = get_peft_model_state_dict(model, save_embedding_layers=False)
    missing = sorted(set(expected) - set(file_tensors))
    unexpected = sorted(set(file_tensors) - set(expected))
    if missing:
        problems.append(f"missing adapter keys (the config asks for them): {missing}")
    if unexpected:
        problems.append(f"unexpected adapter keys: {unexpected}")
    for k in sorted(set(expected) & set(file_tensors)):
        if tuple(expected[k].shape) != tuple(file_tensors[k].shape):
            problems.append(f"{k}: shape {tuple(file_tensors[k].shape)} in the file, "
                            f"{tuple(expected[k].shape)} expected")
        elif not torch.equal(expected[k].float(), file_tensors[k].float()):
            problems.append(f"{k}: loaded value differs from the file's")
    # PEFT's own load result, on the same weights again (idempotent): strict=False over the
    # whole model, so the base's keys are "missing" by design; only lora keys count.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = set_peft_model_state_dict(model, load_peft_weights(adapter_dir),
                                        adapter_name="default")
    for w in caught:
        problems.append(f"warning while loading: {w.category.__name__}: {w.message}")
    if res.unexpected_keys:
        problems.append(f"load_state_dict unexpected keys: {sorted(res.unexpected_keys)}")
    lora_missing = sorted(k for k in res.missing_keys if "lora_" in k)
    if lora_missing:
        problems.append(f"load_state_dict missing lora keys: {lora_missing}")

    dtypes = sorted({str(t.dtype) for t in file_tensors.values()})
    cfg = model.peft_config["default"]
    report.append(f"adapter {adapter_dir}: {len(file_tensors)} tensors ({', '.join(dtypes)}), "
                  f"{len(lora_module_names(model))} LoRA modules; r={cfg.r} "
                  f"lora_alpha={cfg.lora_alpha} use_rslora={cfg.use_rslora} "
                  f"target_modules={sorted(cfg.target_modules)} scaling={scalings(model)}")
    if problems:
        raise RuntimeError("adapter did not load cleanly:\n  " + "\n  ".join(problems))
    return model, report


def read_logits(path):
    """A .gtb (read_gtb) or a .safetensors file (what golden_peft_test.cpp writes)."""
    if path.endswith(".safetensors"):
        from safetensors.numpy import load_file
        return load_file(path)
    return read_gtb(path)[0]


def check(adapter_dir, gtb_path, name, base_dir, tol):
    tensors = read_logits(gtb_path)
    for need in ("input_ids", name):
        if need not in tensors:
            print(f"FAIL: {gtb_path} has no tensor {need!r} (has {sorted(tensors)})")
            return 1
    ids = tensors["input_ids"]
    if ids.dtype != np.int64:
        assert np.all(ids == np.round(ids)), "input_ids are not integers"
    ids = torch.from_numpy(ids.astype(np.int64))
    try:
        model, report = load_adapter_strict(base_dir, adapter_dir)
    except Exception as e:  # PEFT's own errors (size mismatch, bad config) count as failures
        print(f"FAIL: {type(e).__name__}: {e}")
        return 1
    print("\n".join(report))
    got = torch.from_numpy(tensors[name].astype(np.float32))
    ref = logits_of(model, ids)
    if tuple(got.shape) != tuple(ref.shape):
        print(f"FAIL: {name} has shape {tuple(got.shape)}, PEFT gives {tuple(ref.shape)}")
        return 1
    d = maxabs(got, ref)
    print(f"max |{name} - PEFT logits| = {d:.3e} (max |PEFT logits| = {float(ref.abs().max()):.3e},"
          f" tol {tol:g})")
    if not d <= tol:  # also catches NaN
        print("FAIL")
        return 1
    print("OK")
    return 0


def build_base():
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(MODEL_SEED)
    config = LlamaConfig(**model_config_kwargs(), torch_dtype="float32",
                         attn_implementation="eager")
    model = LlamaForCausalLM(config).float().eval()
    g = torch.Generator().manual_seed(NORM_SEED)
    with torch.no_grad():
        for n, p in sorted(model.named_parameters()):
            if n.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
    return model


def make_adapter(base, kwargs):
    from peft import LoraConfig, get_peft_model
    torch.manual_seed(LORA_SEED)
    cfg = LoraConfig(lora_dropout=0.0, bias="none", task_type="CAUSAL_LM", **kwargs)
    pm = get_peft_model(copy.deepcopy(base), cfg)
    g = torch.Generator().manual_seed(LORA_B_SEED)
    nb = 0
    with torch.no_grad():
        for n, p in sorted(pm.named_parameters()):
            if ".lora_B." in n:
                assert torch.count_nonzero(p) == 0, n  # PEFT's init
                p.copy_(B_STD * torch.randn(p.shape, generator=g))
                nb += 1
    assert nb == len(lora_module_names(pm)) > 0
    return pm.eval()


def save_adapter(pm, out_dir):
    from safetensors import safe_open
    pm.save_pretrained(out_dir, safe_serialization=True, save_embedding_layers=False)
    readme = os.path.join(out_dir, "README.md")
    if os.path.exists(readme):
        os.remove(readme)
    cfg_path = os.path.join(out_dir, "adapter_config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["target_modules"] = sorted(cfg["target_modules"])  # PEFT writes a set, hash order
    with open(cfg_path, "w") as f:
        f.write(json.dumps(cfg, indent=2, sort_keys=True))
    assert sorted(os.listdir(out_dir)) == ["adapter_config.json", "adapter_model.safetensors"], \
        os.listdir(out_dir)
    with safe_open(os.path.join(out_dir, "adapter_model.safetensors"), framework="pt") as f:
        return {k: (tuple(f.get_slice(k).get_shape()), f.get_slice(k).get_dtype())
                for k in f.keys()}, cfg


def generate(out):
    import accelerate
    import peft
    import safetensors
    import transformers

    os.makedirs(out, exist_ok=True)
    base = build_base()
    base_dir = os.path.join(out, "base")
    if os.path.exists(base_dir):
        shutil.rmtree(base_dir)
    base.save_pretrained(base_dir, safe_serialization=True)
    for fn in os.listdir(base_dir):
        if fn not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(base_dir, fn))
    assert sorted(os.listdir(base_dir)) == ["config.json", "model.safetensors"]
    base.name_or_path = "peft_tiny/base"  # what PEFT records as base_model_name_or_path

    ids = torch.randint(0, 256, (BATCH, SEQ), generator=torch.Generator().manual_seed(INPUT_SEED))
    tensors = {"input_ids": ids.numpy()}
    plain_base = logits_of(base, ids)
    meta = {"generator": "tests/golden/gen_peft_golden.py",
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "peft": peft.__version__, "accelerate": accelerate.__version__,
                         "safetensors": safetensors.__version__, "numpy": np.__version__},
            "model_config": model_config_kwargs(),
            "attn_implementation": base.config._attn_implementation,
            "seeds": {"model": MODEL_SEED, "norm": NORM_SEED, "lora_A": LORA_SEED,
                      "lora_B": LORA_B_SEED, "input_ids": INPUT_SEED},
            "lora_B_std": B_STD, "threads": THREADS, "base_dir": "base",
            "max_abs_diff": {}, "f64_err": {}}
    keys_report = {}

    for name, (sub, kwargs) in ADAPTERS.items():
        pm = make_adapter(base, kwargs)
        with pm.disable_adapter():
            base_logits = logits_of(pm, ids)
        d = maxabs(base_logits, plain_base)
        assert d == 0.0, f"disable_adapter differs from the plain base by {d}"
        if "base_logits" not in tensors:
            tensors["base_logits"] = base_logits.numpy()
        adapted = logits_of(pm, ids)
        merged = logits_of(copy.deepcopy(pm).merge_and_unload(), ids)
        r, alpha = kwargs["r"], kwargs["lora_alpha"]
        want = alpha / math.sqrt(r) if kwargs.get("use_rslora") else alpha / r
        got = scalings(pm)
        assert abs(got - want) < 1e-12, (got, want)
        tensors[f"{name}_logits"] = adapted.numpy()
        tensors[f"{name}_merged_logits"] = merged.numpy()
        meta["max_abs_diff"][f"{name}_vs_base"] = maxabs(adapted, base_logits)
        meta["max_abs_diff"][f"{name}_vs_merged"] = maxabs(adapted, merged)
        # float64 run of the same model: the yardstick for float32 implementations
        pm64 = copy.deepcopy(pm).double()
        a64 = logits_of(pm64, ids)
        with pm64.disable_adapter():
            b64 = logits_of(pm64, ids)
        for tname, t32, t64 in ((f"{name}_logits", adapted, a64),
                                ("base_logits", base_logits, b64)):
            meta["f64_err"][tname] = maxabs(t32, t64) / float(t64.abs().max())
        keys, cfg = save_adapter(pm, os.path.join(out, sub))
        keys_report[name] = keys
        meta[name] = {"dir": sub, "r": r, "lora_alpha": alpha,
                      "use_rslora": bool(kwargs.get("use_rslora", False)),
                      "target_modules": sorted(kwargs["target_modules"]), "scaling": got,
                      "lora_modules": len(lora_module_names(pm))}
        diffs = meta["max_abs_diff"]
        print(f"{name}: scaling {got!r}; max|adapted - base| = {diffs[name + '_vs_base']:.3e}, "
              f"max|adapted - merged| = {diffs[name + '_vs_merged']:.3e}; "
              f"f64_err {meta['f64_err'][name + '_logits']:.2e}")
        print(f"  adapter_config.json: {json.dumps(cfg, sort_keys=True)}")
        for k, (shape, dt) in keys.items():
            print(f"  {k}  {dt} {list(shape)}")
        assert meta["max_abs_diff"][f"{name}_vs_base"] > 1e-3
        assert meta["max_abs_diff"][f"{name}_vs_merged"] < 1e-5
    print(f"base: max |logits| = {float(plain_base.abs().max()):.3e}; "
          f"f64_err {meta['f64_err']['base_logits']:.2e}")

    gtb = os.path.join(out, "peft_logits.gtb")
    write_gtb(gtb, tensors, meta)

    # Round trip through the saved files, exactly as --check does it.
    stored, _ = read_gtb(gtb)
    for name, (sub, _) in ADAPTERS.items():
        model, report = load_adapter_strict(base_dir, os.path.join(out, sub))
        print("\n".join(report))
        d = maxabs(logits_of(model, ids), torch.from_numpy(stored[f"{name}_logits"]))
        print(f"  reloaded from disk: max |logits - {name}_logits| = {d:.3e}")
        assert d <= 1e-6, d
        with model.disable_adapter():
            d = maxabs(logits_of(model, ids), torch.from_numpy(stored["base_logits"]))
        assert d <= 1e-6, d

    total = 0
    for root, _, files in sorted(os.walk(out)):
        for fn in sorted(files):
            p = os.path.join(root, fn)
            total += os.path.getsize(p)
            print(f"  {os.path.relpath(p, out):40s} {os.path.getsize(p):8d} bytes")
    print(f"total {total} bytes")
    assert total < 2 * 1024 * 1024
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="generate into this directory")
    ap.add_argument("--check", nargs=2, metavar=("ADAPTER_DIR", "LOGITS_GTB"))
    ap.add_argument("--name", default="logits", help="logits tensor in LOGITS_GTB (--check)")
    ap.add_argument("--base", default=os.path.join(DEFAULT_OUT, "base"),
                    help="base model directory (--check)")
    ap.add_argument("--tol", type=float, default=1e-4, help="max abs diff allowed (--check)")
    args = ap.parse_args()
    torch.set_num_threads(THREADS)
    if args.check:
        return check(args.check[0], args.check[1], args.name, args.base, args.tol)
    return generate(args.out)


if __name__ == "__main__":
    sys.exit(main())
