#!/usr/bin/env python3
"""The PyTorch arm of the training-step comparison (bench/compare_train_step.sh, issue 5).

The same GPT-2-style decoder as bench/train_step_bench.cpp, written with plain torch
modules: learned positions, pre-norm blocks (LayerNorm, causal multi-head attention with a
fused qkv projection, GELU-tanh MLP of width 4d), a final LayerNorm and a head tied to the
token embedding; fp32 on the CPU. One step is forward, mean cross-entropy, backward,
AdamW.step() (unless --optimizer=none) and zero_grad(set_to_none=True). Weight decay applies to the matrices and
embeddings, not to biases and norm weights, as fitgrad's optim::decay_groups does.

Attention (--attention): sdpa, torch's fused F.scaled_dot_product_attention(is_causal=True),
as GPT-2 code written for torch 2 calls it (the default where torch has it, 2.0 on), or
composed, the q k^T -> mask -> softmax -> @ v that GPT-2 implementations ran before it (the
only one torch 1.13 has, and the torch arm of bench/RESULTS.md's rows before issue 60).

It runs in the reference environment (bench/reference-env.sh) or, for the older rows, on
Debian's PyTorch 1.13. Prints the torch build on a `config:` line (reference_env.torch_line)
and one machine-readable line the driver parses:
  RESULT arm=torch median_ms=... min_ms=... tokens_per_s=... steps=... threads=... attention=...
"""
import argparse
import math
import statistics
import sys
import time

import reference_env

try:
    import torch
except ImportError as e:
    sys.exit(f"train_step_torch.py: {e} under {sys.executable}: {reference_env.HOW}")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

SDPA = hasattr(F, "scaled_dot_product_attention")


class Block(nn.Module):
    def __init__(self, d, heads, ctx, attention):
        super().__init__()
        self.heads = heads
        self.fused = attention == "sdpa"
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.attn_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)
        mask = torch.tril(torch.ones(ctx, ctx, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, ctx, ctx), persistent=False)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        hd = c // self.heads
        q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2) for z in (q, k, v))
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))  # (B, H, T, T)
            att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
            y = F.softmax(att, dim=-1) @ v  # (B, H, T, D)
        return self.attn_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    def __init__(self, vocab, ctx, layers, d, heads, attention):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.h = nn.ModuleList(Block(d, heads, ctx, attention) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def loss(self, ids, targets):
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe.weight[:t]
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # (B, T, V), tied head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--ctx", type=int, default=1024)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bf16", action="store_true",
                   help="forward under torch.autocast('cpu', torch.bfloat16)")
    p.add_argument("--optimizer", choices=["adamw", "none"], default="adamw",
                   help="none: forward and backward only")
    p.add_argument("--attention", choices=["sdpa", "composed"],
                   default="sdpa" if SDPA else "composed",
                   help="fused scaled_dot_product_attention (torch 2) or the composed ops")
    a = p.parse_args()
    if a.attention == "sdpa" and not SDPA:
        p.error(f"torch {torch.__version__} has no scaled_dot_product_attention")

    torch.set_num_threads(a.threads)
    print(f"config: {reference_env.torch_line()}, attention {a.attention}", flush=True)
    torch.manual_seed(0)
    model = Gpt2(a.vocab, a.ctx, a.layers, a.d, a.heads, a.attention)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g)
    x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = model.loss(x, y)
        loss.backward()
        if a.optimizer == "adamw":
            opt.step()
        opt.zero_grad(set_to_none=True)
        dt = time.perf_counter() - t0
        if i >= a.warmup:
            times.append(dt * 1e3)
        print(f"torch step {i} loss {loss.item():.4f} {dt * 1e3:.1f} ms", flush=True)
    med = statistics.median(times)
    print(f"RESULT arm=torch median_ms={med:.1f} min_ms={min(times):.1f} "
          f"tokens_per_s={a.batch * a.seq / (med / 1e3):.0f} steps={a.steps} threads={a.threads} "
          f"optimizer={a.optimizer} precision={'bf16' if a.bf16 else 'fp32'} "
          f"attention={a.attention} torch={torch.__version__}",
          flush=True)


if __name__ == "__main__":
    main()
