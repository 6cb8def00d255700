#!/usr/bin/env python3
"""Golden orders for fitgrad's --group_by_length (data::length_grouped_order, Note [Batches
grouped by length] in data/window_order.h), written by transformers' own
get_length_grouped_indices (transformers.trainer_pt_utils, the order of its
LengthGroupedSampler).

How to run (needs transformers and torch, e.g. the venv of tests/golden/README.md; CI does
NOT run this, it only reads the committed output):

    /work/venv-hf/bin/python tests/golden/gen_length_grouped_golden.py

transformers draws its own permutation with torch.randperm; fitgrad draws its own with Philox.
To compare the grouping alone, torch.randperm is replaced during the call by a function that
returns a given permutation (drawn here from Python's random with a fixed seed), and that
permutation is stored with the case. Each case: lengths, batch_size, the permutation, and
transformers' order. The cases cover fewer windows than 4 batches (one megabatch of one
batch), several megabatches with a ragged last one, the 50-batch cap, ties (stable order),
and the longest window in a later megabatch (swapped to the front).

Writes tests/golden/length_grouped/cases.json.
"""
import json
import os
import random

import torch
import transformers.trainer_pt_utils as tpu


def grouped(lengths, batch_size, perm):
    real = torch.randperm
    torch.randperm = lambda n, generator=None: torch.tensor(perm)
    try:
        return [int(i) for i in tpu.get_length_grouped_indices(lengths, batch_size)]
    finally:
        torch.randperm = real


def main():
    rng = random.Random(20261205)
    cases = []
    for n, batch, top in [(6, 4, 9), (37, 2, 16), (100, 3, 5), (1000, 4, 512), (25, 8, 64),
                          (41, 5, 3)]:
        lengths = [rng.randint(1, top) for _ in range(n)]
        perm = list(range(n))
        rng.shuffle(perm)
        if n == 100:  # the longest window last in the permutation: a later megabatch holds it
            lengths[perm[-1]] = top + 1
        cases.append({"lengths": lengths, "batch_size": batch, "permutation": perm,
                      "order": grouped(lengths, batch, perm)})
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "length_grouped", "cases.json")
    with open(out, "w") as f:
        json.dump({"source": "transformers.trainer_pt_utils.get_length_grouped_indices "
                             + __import__("transformers").__version__, "cases": cases}, f)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
