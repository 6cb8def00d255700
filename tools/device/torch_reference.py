#!/usr/bin/env python3
"""PyTorch's side of tools/device-check.sh (issue 15), on the same card in the same run.

Prints the rows bench/cuda_bench.cpp prints, as PyTorch computes them, plus the training
reference:
  RESULT gemm <bf16|tf32>.<shape> <TFLOP/s>           torch.matmul
  RESULT attention fwdbwd.d<D>.t<T>.<full|causal> <TFLOP/s>
                                                      F.scaled_dot_product_attention, fwd+bwd
  RESULT train gpt2.tokens_per_s <tokens/s>           GPT-2 124M, T 1024, bf16 autocast, AdamW
  RESULT train gpt2.peak_mib <MiB>                    torch.cuda.max_memory_allocated
The timing is the median of --reps runs after --warmup, with torch.cuda.synchronize around
each, as the fitgrad bench times; FLOPs are counted the same way (see cuda_bench.cpp).
The GPT-2 here is written for this comparison: fitgrad's gpt2 preset (pre-norm blocks,
GELU-tanh MLP, tied head, learned positions, Hugging Face's dropout 0.1 on the embeddings,
the attention probabilities and both residual branches) with PyTorch's fused AdamW.
`--device cpu --small` runs every row at a sixteenth of each size (GPT-2 at 2 layers, T 64)
on the CPU: the device check's rehearsal. It needs torch >= 2.0 (scaled_dot_product_attention).
"""
import argparse
import math
import statistics
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # the device check's rehearsal on a machine without PyTorch
    print("torch_reference: skipped: this python3 has no torch")
    raise SystemExit(0)


DROPOUT = 0.1  # Hugging Face's GPT-2 (and fitgrad's gpt2 preset)


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(fn, args):
    for _ in range(args.warmup):
        fn()
    synchronize(args.device)
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        fn()
        synchronize(args.device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def gemm_rows(args):
    shapes = [("4096^3", 4096, 4096, 4096),
              ("gpt2.qkv_8192x2304x768", 8192, 2304, 768),
              ("gpt2.mlp_8192x3072x768", 8192, 3072, 768),
              ("gpt2.head_8192x50257x768", 8192, 50257, 768),
              ("llama7b.mlp_8192x11008x4096", 8192, 11008, 4096),
              ("llama7b.attn_8192x4096x4096", 8192, 4096, 4096)]
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        dtype = torch.float32 if tf32 else torch.bfloat16
        for name, m, n, k in shapes:
            m, n, k = (max(1, z // args.shrink) for z in (m, n, k))
            a = torch.rand(m, k, device=args.device, dtype=dtype) * 2 - 1
            b = torch.rand(k, n, device=args.device, dtype=dtype) * 2 - 1
            sec = median_seconds(lambda: torch.matmul(a, b), args)
            print(f"RESULT gemm {'tf32' if tf32 else 'bf16'}.{name} {2 * m * n * k / sec / 1e12:.4g}",
                  flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False


def attention_rows(args):
    tokens = 16384 // args.shrink
    for d in (64, 128):
        for full_t in (1024, 2048, 4096, 8192):
            for causal in (False, True):
                t = min(tokens, full_t // args.shrink)
                heads, batch = 2048 // d, tokens // t
                q, k, v = (torch.randn(batch, heads, t, d, device=args.device,
                                       dtype=torch.bfloat16, requires_grad=True)
                           for _ in range(3))
                dout = torch.randn(batch, heads, t, d, device=args.device, dtype=torch.bfloat16)

                def step():
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    o.backward(dout)

                sec = median_seconds(step, args)
                fwd = 4 * batch * heads * t * t * d / (2 if causal else 1)
                print(f"RESULT attention fwdbwd.d{d}.t{full_t}.{'causal' if causal else 'full'} "
                      f"{3.5 * fwd / sec / 1e12:.4g}", flush=True)


class Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(c)
        self.c_attn = nn.Linear(c, 3 * c)
        self.attn_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c)
        self.c_fc = nn.Linear(c, 4 * c)
        self.mlp_proj = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=DROPOUT)
        x = x + F.dropout(self.attn_proj(a.transpose(1, 2).reshape(b, t, c)), DROPOUT)
        mlp = self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x + F.dropout(mlp, DROPOUT)


class GPT2(nn.Module):
    def __init__(self, vocab=50257, positions=1024, c=768, layers=12, heads=12):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(positions, c)
        self.blocks = nn.ModuleList(Block(c, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)

    def forward(self, ids, targets):
        x = F.dropout(self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device)),
                      DROPOUT)
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def train_rows(args):
    torch.manual_seed(0)
    layers, seq = (2, 64) if args.shrink > 1 else (12, 1024)
    model = GPT2(layers=layers).to(args.device)
    params = sum(p.numel() for p in model.parameters())
    cuda = args.device.type == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.0, fused=cuda)
    ids = torch.randint(0, 50257, (args.batch, seq), device=args.device)
    targets = torch.randint(0, 50257, (args.batch, seq), device=args.device)

    def step():
        with torch.autocast(args.device.type, dtype=torch.bfloat16):
            loss = model(ids, targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    sec = median_seconds(step, args)
    tokens = args.batch * seq
    # MFU against the H100/H200 dense bf16 datasheet rate, 6 N + attention FLOPs per token.
    flops = 6 * params * tokens + 12 * layers * seq * 768 * tokens
    print(f"RESULT train gpt2.tokens_per_s {tokens / sec:.0f}", flush=True)
    print(f"RESULT train gpt2.mfu {flops / sec / 989e12:.3f}", flush=True)
    if cuda:
        print(f"RESULT train gpt2.peak_mib {torch.cuda.max_memory_allocated() / 2**20:.0f}",
              flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["gemm", "attention", "train"])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--device", default="cuda", help="cuda (the default) or cpu")
    parser.add_argument("--small", action="store_true", help="every size divided by 16")
    args = parser.parse_args()
    args.device = torch.device(args.device)
    args.shrink = 16 if args.small else 1
    if args.device.type == "cuda" and not torch.cuda.is_available():
        print("torch_reference: skipped: torch sees no CUDA device")
        return
    if not hasattr(F, "scaled_dot_product_attention"):
        print(f"torch_reference: skipped: torch {torch.__version__} has no "
              "scaled_dot_product_attention (2.0 or later)")
        return
    if args.only in (None, "gemm"):
        gemm_rows(args)
    if args.only in (None, "attention"):
        attention_rows(args)
    if args.only in (None, "train"):
        train_rows(args)


if __name__ == "__main__":
    main()
