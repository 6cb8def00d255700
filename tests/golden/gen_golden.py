#!/usr/bin/python3
"""PyTorch golden data for fitgrad's op and transformer-block tests (issue 3).

How to run (needs Debian's python3-torch, 1.13 on CPU; CI does NOT run this, it only
reads the committed outputs):

    /usr/bin/python3 tests/golden/gen_golden.py            # rewrites tests/golden/*.gtb
    /usr/bin/python3 tests/golden/gen_golden.py --out DIR  # writes elsewhere (to compare)

What it writes: one `.gtb` file per case, in the format described at the top of
tests/golden/golden_file.h (an 8-byte little-endian header length, a JSON header naming
each tensor's dtype, shape, offset and byte count plus a "meta" object, then the raw
little-endian data: f32 for floats, i64 for integer ids). The output is deterministic:
fixed seeds, sorted JSON keys, so re-running it reproduces the files byte for byte on the
same torch build.

The cases:
  * op cases (read by golden_ops_test.cpp): matmul (plain, batched with broadcasting,
    transposed), linear, layer_norm, rms_norm, softmax (last and a middle dim),
    log_softmax, gelu (tanh), embedding, cross_entropy (with ignore_index = -100 rows) and
    attention (causal MHA, causal GQA, non-causal T != S, causal T < S). Each file holds
    the inputs, the forward output `out`, a fixed random `R`, and `d<input>`: the gradient
    of sum(out * R) with respect to every differentiable input.
  * block.gtb (read by golden_block_test.cpp): a 2-layer pre-norm GPT-2-style decoder,
    every parameter under its Hugging Face GPT-2 name (Linear weights stored (in, out) as
    GPT-2's Conv1D does), the input ids, the targets, the logits, the mean cross-entropy
    loss and `<param>.grad` for every parameter.
  * llama_block.gtb (read by golden_llama_test.cpp): a 2-layer Llama-style decoder (RMSNorm,
    RoPE in Hugging Face's rotate_half convention, grouped-query attention, SwiGLU MLP,
    untied lm_head), every parameter under its Hugging Face Llama name (Linear weights
    stored in torch's (out, in) layout, no biases), stored like block.gtb.

Numerics: inputs are drawn in float32, so they are exact in the files. The reference
forward and gradients are computed by torch.autograd in float64 from those exact inputs
and stored cast to float32. The same computation is also run in float32, and its normwise
error against float64 (max |f32 - f64| / max |f64|) is recorded in meta["torch_f32_err"]
per stored result: the accuracy plain f32 PyTorch reaches, which is what the C++
tolerances are judged against.

torch 1.13 has no scaled_dot_product_attention, no RMSNorm and no RoPE: all are written
explicitly here with plain tensor ops (attention: q @ k^T * scale, mask, softmax, @ v,
grouped-query heads by repeating kv heads; RoPE: x cos + rotate_half(x) sin).
"""

import argparse
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

FORMAT = "fitgrad-golden"
VERSION = 1


# ---------------------------------------------------------------------------- file I/O


def write_case(path, tensors, meta):
    """Writes `tensors` (name -> torch tensor) and `meta` (JSON-able) as one .gtb file."""
    assert sys.byteorder == "little", "the format is little-endian"
    entries = {}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        if t.dtype.is_floating_point:
            t, dtype = t.to(torch.float32), "f32"
        else:
            t, dtype = t.to(torch.int64), "i64"
        data = t.numpy().tobytes()
        entries[name] = {"dtype": dtype, "shape": list(t.shape), "offset": offset,
                         "nbytes": len(data)}
        pad = (-len(data)) % 8  # keep every tensor 8-byte aligned
        blobs.append(data + b"\0" * pad)
        offset += len(data) + pad
    header = json.dumps({"format": FORMAT, "version": VERSION, "tensors": entries,
                         "meta": meta}, sort_keys=True, separators=(",", ":")).encode()
    header += b" " * ((-len(header)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        for b in blobs:
            f.write(b)


# ---------------------------------------------------------------------------- helpers


def gen(seed):
    return torch.Generator().manual_seed(seed)


def randn(g, *shape, scale=1.0):
    return torch.randn(tuple(shape), generator=g, dtype=torch.float32) * scale


def normwise_err(got, want):
    denom = want.abs().max().item()
    err = (got.double() - want).abs().max().item()
    return err / denom if denom > 0 else err


def run_op_case(out_dir, name, fn, inputs, diff, meta, seed):
    """Forward `fn(**inputs)`, then the gradients of sum(out * R) for the inputs in `diff`,
    in float64 (stored) and float32 (its error goes to meta). `inputs` are f32 tensors (or
    integer tensors / python values passed through)."""
    results = {}
    for dtype in (torch.float64, torch.float32):
        args = {}
        for k, v in inputs.items():
            if torch.is_tensor(v) and v.dtype.is_floating_point:
                v = v.to(dtype).requires_grad_(k in diff)
            args[k] = v
        out = fn(**args)
        if dtype == torch.float64:
            R = randn(gen(seed + 1000), *out.shape)
        (out * R.to(dtype)).sum().backward()
        results[dtype] = {"out": out.detach(), **{"d" + k: args[k].grad for k in diff}}
    f64, f32 = results[torch.float64], results[torch.float32]
    meta = dict(meta)
    meta["torch_f32_err"] = {k: normwise_err(f32[k], f64[k]) for k in f64}
    tensors = {k: v for k, v in inputs.items() if torch.is_tensor(v)}
    tensors.update({"R": R, **f64})
    write_case(os.path.join(out_dir, name + ".gtb"), tensors, meta)
    print(f"{name}: " + ", ".join(f"{k} f32-err {v:.1e}" for k, v in meta["torch_f32_err"].items()))


# ---------------------------------------------------------------------------- reference ops


def attention_ref(q, k, v, causal, scale):
    """Explicit attention. q (B, Hq, T, D), k and v (B, Hkv, S, D); query head h uses kv
    head h // (Hq / Hkv). Causal is bottom-right aligned: query i sees key j iff
    j <= i + (S - T)."""
    hq, hkv = q.shape[1], k.shape[1]
    if hq != hkv:
        k = k.repeat_interleave(hq // hkv, dim=1)
        v = v.repeat_interleave(hq // hkv, dim=1)
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:
        t, skv = q.shape[2], k.shape[2]
        i = torch.arange(t).unsqueeze(1)
        j = torch.arange(skv).unsqueeze(0)
        s = s.masked_fill(j > i + (skv - t), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def rms_norm_ref(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


# ---------------------------------------------------------------------------- op cases


def op_cases(out_dir):
    g = gen(1)
    # matmul: plain 2-d.
    run_op_case(out_dir, "matmul_2d", lambda a, b: a @ b,
                {"a": randn(g, 5, 7), "b": randn(g, 7, 3)}, ["a", "b"],
                {"trans_a": False, "trans_b": False}, 10)
    # matmul: batched, b broadcast over the leading batch dim and a size-1 batch dim.
    run_op_case(out_dir, "matmul_batched_broadcast", lambda a, b: a @ b,
                {"a": randn(g, 2, 3, 4, 5), "b": randn(g, 1, 5, 6)}, ["a", "b"],
                {"trans_a": False, "trans_b": False}, 11)
    # matmul with both transpose flags: out = a^T @ b^T, a (B, k, m), b (B, n, k).
    run_op_case(out_dir, "matmul_transposed",
                lambda a, b: a.transpose(-1, -2) @ b.transpose(-1, -2),
                {"a": randn(g, 3, 6, 4), "b": randn(g, 3, 5, 6)}, ["a", "b"],
                {"trans_a": True, "trans_b": True}, 12)
    # linear: x @ weight^T + bias.
    run_op_case(out_dir, "linear", lambda x, weight, bias: F.linear(x, weight, bias),
                {"x": randn(g, 2, 5, 8), "weight": randn(g, 6, 8, scale=0.5),
                 "bias": randn(g, 6)}, ["x", "weight", "bias"], {}, 13)
    # layer_norm with weight and bias; rows with an offset and spread, so mean/var matter.
    run_op_case(out_dir, "layer_norm",
                lambda x, weight, bias: F.layer_norm(x, (x.shape[-1],), weight, bias, 1e-5),
                {"x": randn(g, 3, 5, 16, scale=2.0) + 0.5, "weight": 1 + randn(g, 16, scale=0.3),
                 "bias": randn(g, 16, scale=0.3)}, ["x", "weight", "bias"], {"eps": 1e-5}, 14)
    run_op_case(out_dir, "rms_norm", lambda x, weight: rms_norm_ref(x, weight, 1e-6),
                {"x": randn(g, 4, 24, scale=1.5), "weight": 1 + randn(g, 24, scale=0.3)},
                ["x", "weight"], {"eps": 1e-6}, 15)
    run_op_case(out_dir, "softmax_last", lambda x: torch.softmax(x, dim=-1),
                {"x": randn(g, 4, 6, 10, scale=3.0)}, ["x"], {"dim": -1}, 16)
    run_op_case(out_dir, "softmax_middle", lambda x: torch.softmax(x, dim=1),
                {"x": randn(g, 3, 7, 5, scale=3.0)}, ["x"], {"dim": 1}, 17)
    run_op_case(out_dir, "log_softmax_last", lambda x: torch.log_softmax(x, dim=-1),
                {"x": randn(g, 5, 12, scale=3.0)}, ["x"], {"dim": -1}, 18)
    run_op_case(out_dir, "gelu_tanh", lambda x: F.gelu(x, approximate="tanh"),
                {"x": randn(g, 6, 20, scale=2.5)}, ["x"], {}, 19)
    run_op_case(out_dir, "embedding", lambda weight, ids: F.embedding(ids, weight),
                {"weight": randn(g, 10, 6), "ids": torch.tensor([[1, 3, 3, 0], [9, 1, 3, 7]])},
                ["weight"], {}, 20)

    # cross_entropy: mean over the rows whose target is not -100. R is a scalar here.
    n, vocab = 12, 20
    targets = torch.randint(0, vocab, (n,), generator=g)
    targets[[2, 7, 8]] = -100
    run_op_case(out_dir, "cross_entropy",
                lambda logits, targets: F.cross_entropy(logits, targets, ignore_index=-100),
                {"logits": randn(g, n, vocab, scale=3.0), "targets": targets}, ["logits"],
                {"ignore_index": -100}, 21)

    # attention: causal MHA, causal GQA (Hq=4, Hkv=2), non-causal T != S, causal T < S.
    att = [
        ("attention_causal_mha", (2, 4, 9, 8), (2, 4, 9, 8), True, 0.0),
        ("attention_causal_gqa", (2, 4, 7, 8), (2, 2, 7, 8), True, 0.0),
        ("attention_noncausal_t_ne_s", (1, 2, 5, 8), (1, 2, 11, 8), False, 0.0),
        ("attention_causal_t_lt_s", (1, 2, 3, 16), (1, 1, 8, 16), True, 0.3),
    ]
    for i, (name, qs, ks, causal, scale) in enumerate(att):
        eff = scale if scale else 1.0 / math.sqrt(qs[-1])
        run_op_case(out_dir, name,
                    lambda q, k, v, c=causal, s=eff: attention_ref(q, k, v, c, s),
                    {"q": randn(g, *qs), "k": randn(g, *ks), "v": randn(g, *ks)},
                    ["q", "k", "v"], {"causal": causal, "scale": scale}, 30 + i)


# ---------------------------------------------------------------------------- block case

V, C, T, B, L, NH = 64, 32, 16, 2, 2, 4


def block_params(g):
    """GPT-2 names; Linear weights (in, out) like GPT-2's Conv1D. Larger-than-GPT-2 init
    (and random LayerNorm affine) so that no gradient is trivially small."""
    p = {"transformer.wte.weight": randn(g, V, C, scale=0.3),
         "transformer.wpe.weight": randn(g, T, C, scale=0.1)}
    for i in range(L):
        h = f"transformer.h.{i}."
        p[h + "ln_1.weight"] = 1 + randn(g, C, scale=0.1)
        p[h + "ln_1.bias"] = randn(g, C, scale=0.1)
        p[h + "attn.c_attn.weight"] = randn(g, C, 3 * C, scale=0.2)
        p[h + "attn.c_attn.bias"] = randn(g, 3 * C, scale=0.1)
        p[h + "attn.c_proj.weight"] = randn(g, C, C, scale=0.2)
        p[h + "attn.c_proj.bias"] = randn(g, C, scale=0.1)
        p[h + "ln_2.weight"] = 1 + randn(g, C, scale=0.1)
        p[h + "ln_2.bias"] = randn(g, C, scale=0.1)
        p[h + "mlp.c_fc.weight"] = randn(g, C, 4 * C, scale=0.2)
        p[h + "mlp.c_fc.bias"] = randn(g, 4 * C, scale=0.1)
        p[h + "mlp.c_proj.weight"] = randn(g, 4 * C, C, scale=0.1)
        p[h + "mlp.c_proj.bias"] = randn(g, C, scale=0.1)
    p["transformer.ln_f.weight"] = 1 + randn(g, C, scale=0.1)
    p["transformer.ln_f.bias"] = randn(g, C, scale=0.1)
    return p


def block_forward(p, idx, targets):
    """Pre-norm decoder: x = wte[idx] + wpe; per block x += attn(ln_1(x)), x += mlp(ln_2(x));
    ln_f; tied head logits = x @ wte^T; mean cross-entropy. Returns (logits, loss)."""
    b, t = idx.shape
    hd = C // NH
    x = F.embedding(idx, p["transformer.wte.weight"]) + p["transformer.wpe.weight"][:t]
    for i in range(L):
        h = f"transformer.h.{i}."
        a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], 1e-5)
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]  # (B, T, 3C)
        q, k, v = qkv.split(C, dim=2)
        q, k, v = (z.reshape(b, t, NH, hd).transpose(1, 2) for z in (q, k, v))  # (B, NH, T, hd)
        y = attention_ref(q, k, v, True, 1.0 / math.sqrt(hd))
        y = y.transpose(1, 2).reshape(b, t, C)
        x = x + (y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"])
        m = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], 1e-5)
        m = F.gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"], approximate="tanh")
        x = x + (m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], 1e-5)
    logits = x @ p["transformer.wte.weight"].t()  # (B, T, V)
    loss = F.cross_entropy(logits.reshape(b * t, V), targets.reshape(b * t))
    return logits, loss


def block_case(out_dir):
    g = gen(100)
    params = block_params(g)
    tokens = torch.randint(0, V, (B, T + 1), generator=g)
    idx, targets = tokens[:, :T].contiguous(), tokens[:, 1:].contiguous()
    results = {}
    for dtype in (torch.float64, torch.float32):
        p = {k: v.to(dtype).requires_grad_(True) for k, v in params.items()}
        logits, loss = block_forward(p, idx, targets)
        loss.backward()
        results[dtype] = {"logits": logits.detach(), "loss": loss.detach(),
                          **{k + ".grad": v.grad for k, v in p.items()}}
    f64, f32 = results[torch.float64], results[torch.float32]
    meta = {"vocab": V, "n_embd": C, "n_positions": T, "batch": B, "n_layer": L, "n_head": NH,
            "layer_norm_eps": 1e-5, "gelu": "tanh", "linear_weight_layout": "(in, out)",
            "param_names": list(params.keys()),
            "torch_f32_err": {k: normwise_err(f32[k], f64[k]) for k in f64}}
    write_case(os.path.join(out_dir, "block.gtb"),
               {**params, "idx": idx, "targets": targets, **f64}, meta)
    worst = max(meta["torch_f32_err"].items(), key=lambda kv: kv[1])
    print(f"block: loss {f64['loss'].item():.6f}, worst torch f32 err {worst[1]:.1e} ({worst[0]})")


# ---------------------------------------------------------------------------- llama case

LV, LC, LT, LB, LL, LNH, LKV, LI = 64, 32, 16, 2, 2, 4, 2, 48
LEPS, LTHETA = 1e-5, 10000.0


def llama_params(g):
    """Hugging Face Llama names; Linear weights in torch (out, in) layout, no biases; untied
    lm_head. Random RMSNorm weights (around 1) so that no gradient is trivial."""
    hd = LC // LNH
    p = {"model.embed_tokens.weight": randn(g, LV, LC, scale=0.3)}
    for i in range(LL):
        h = f"model.layers.{i}."
        p[h + "input_layernorm.weight"] = 1 + randn(g, LC, scale=0.1)
        p[h + "self_attn.q_proj.weight"] = randn(g, LNH * hd, LC, scale=0.2)
        p[h + "self_attn.k_proj.weight"] = randn(g, LKV * hd, LC, scale=0.2)
        p[h + "self_attn.v_proj.weight"] = randn(g, LKV * hd, LC, scale=0.2)
        p[h + "self_attn.o_proj.weight"] = randn(g, LC, LNH * hd, scale=0.2)
        p[h + "post_attention_layernorm.weight"] = 1 + randn(g, LC, scale=0.1)
        p[h + "mlp.gate_proj.weight"] = randn(g, LI, LC, scale=0.2)
        p[h + "mlp.up_proj.weight"] = randn(g, LI, LC, scale=0.2)
        p[h + "mlp.down_proj.weight"] = randn(g, LC, LI, scale=0.2)
    p["model.norm.weight"] = 1 + randn(g, LC, scale=0.1)
    p["lm_head.weight"] = randn(g, LV, LC, scale=0.3)
    return p


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_ref(x, theta):
    """Hugging Face Llama RoPE on x (B, H, T, D) at positions 0..T-1: x cos + rotate_half(x)
    sin, angles t * theta^(-2i/D) repeated over both halves."""
    t, d = x.shape[2], x.shape[3]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = torch.arange(t, dtype=torch.float64).unsqueeze(1) * inv_freq.unsqueeze(0)  # (T, D/2)
    emb = torch.cat((ang, ang), dim=-1).to(x.dtype)  # (T, D)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def llama_forward(p, idx, targets):
    """Pre-norm Llama decoder: x = embed_tokens[idx]; per layer
    x += o_proj(attn(rope(q), rope(k), v)) of input_layernorm(x),
    x += down(silu(gate(m)) * up(m)) of m = post_attention_layernorm(x); norm; untied
    lm_head; mean cross-entropy. Returns (logits, loss)."""
    b, t = idx.shape
    hd = LC // LNH
    x = F.embedding(idx, p["model.embed_tokens.weight"])
    for i in range(LL):
        h = f"model.layers.{i}."
        a = rms_norm_ref(x, p[h + "input_layernorm.weight"], LEPS)
        q = (a @ p[h + "self_attn.q_proj.weight"].t()).reshape(b, t, LNH, hd).transpose(1, 2)
        k = (a @ p[h + "self_attn.k_proj.weight"].t()).reshape(b, t, LKV, hd).transpose(1, 2)
        v = (a @ p[h + "self_attn.v_proj.weight"].t()).reshape(b, t, LKV, hd).transpose(1, 2)
        q, k = rope_ref(q, LTHETA), rope_ref(k, LTHETA)
        y = attention_ref(q, k, v, True, 1.0 / math.sqrt(hd))  # kv heads repeated
        y = y.transpose(1, 2).reshape(b, t, LNH * hd)
        x = x + y @ p[h + "self_attn.o_proj.weight"].t()
        m = rms_norm_ref(x, p[h + "post_attention_layernorm.weight"], LEPS)
        f = F.silu(m @ p[h + "mlp.gate_proj.weight"].t()) * (m @ p[h + "mlp.up_proj.weight"].t())
        x = x + f @ p[h + "mlp.down_proj.weight"].t()
    x = rms_norm_ref(x, p["model.norm.weight"], LEPS)
    logits = x @ p["lm_head.weight"].t()  # (B, T, V)
    loss = F.cross_entropy(logits.reshape(b * t, LV), targets.reshape(b * t))
    return logits, loss


def llama_case(out_dir):
    g = gen(200)
    params = llama_params(g)
    tokens = torch.randint(0, LV, (LB, LT + 1), generator=g)
    idx, targets = tokens[:, :LT].contiguous(), tokens[:, 1:].contiguous()
    results = {}
    for dtype in (torch.float64, torch.float32):
        p = {k: v.to(dtype).requires_grad_(True) for k, v in params.items()}
        logits, loss = llama_forward(p, idx, targets)
        loss.backward()
        results[dtype] = {"logits": logits.detach(), "loss": loss.detach(),
                          **{k + ".grad": v.grad for k, v in p.items()}}
    f64, f32 = results[torch.float64], results[torch.float32]
    meta = {"vocab": LV, "hidden": LC, "seq_len": LT, "batch": LB, "n_layer": LL,
            "n_head": LNH, "n_kv_head": LKV, "intermediate": LI, "rms_norm_eps": LEPS,
            "rope_theta": LTHETA, "tie_word_embeddings": False,
            "linear_weight_layout": "(out, in)", "param_names": list(params.keys()),
            "torch_f32_err": {k: normwise_err(f32[k], f64[k]) for k in f64}}
    write_case(os.path.join(out_dir, "llama_block.gtb"),
               {**params, "idx": idx, "targets": targets, **f64}, meta)
    worst = max(meta["torch_f32_err"].items(), key=lambda kv: kv[1])
    print(f"llama_block: loss {f64['loss'].item():.6f}, worst torch f32 err {worst[1]:.1e} "
          f"({worst[0]})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                    help="output folder (default: this script's folder)")
    args = ap.parse_args()
    torch.set_num_threads(2)
    os.makedirs(args.out, exist_ok=True)
    op_cases(args.out)
    block_case(args.out)
    llama_case(args.out)


if __name__ == "__main__":
    main()
