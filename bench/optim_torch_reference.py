#!/usr/bin/python3
"""torch.optim.AdamW and torch.nn.utils.clip_grad_norm_ on the parameters of
bench/optim_bench.cpp (29,908,992 f32 elements in the same 25 tensors, gradients 1e-3),
the reference row of the optimizer section of bench/RESULTS.md.

    /usr/bin/python3 bench/optim_torch_reference.py THREADS

Prints the median of 5 timed steps (after one untimed step that creates the states) for
torch's default single-tensor AdamW (foreach=False, the CPU default in 1.13) and its
multi-tensor one (foreach=True), then the median of 5 clip_grad_norm_ calls with a
max_norm above the norm, as the C++ benchmark does.
"""

import sys
import time

import torch

torch.set_num_threads(int(sys.argv[1]))
shapes = [(14336, 768)] + [(768, 2048), (2048,)] * 12
ps = [torch.full(s, 0.01, requires_grad=True) for s in shapes]
for p in ps:
    p.grad = torch.full(p.shape, 1e-3)
for foreach in (False, True):
    opt = torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.1, foreach=foreach)
    opt.step()
    ts = []
    for _ in range(5):
        t = time.perf_counter()
        opt.step()
        ts.append(time.perf_counter() - t)
    print(f"torch AdamW foreach={foreach}: median {sorted(ts)[2]*1e3:.0f} ms")
ts = []
for _ in range(5):
    t = time.perf_counter()
    torch.nn.utils.clip_grad_norm_(ps, 1e3)
    ts.append(time.perf_counter() - t)
print(f"torch clip_grad_norm_: median {sorted(ts)[2]*1e3:.0f} ms")
