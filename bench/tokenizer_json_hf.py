#!/usr/bin/env python3
"""The `tokenizers` library's encode time for a tokenizer.json on the first MiB of Austen, one
thread: the reference arm of bench/tokenizer_bench's BM_TokenizerJsonEncode1MiB.

    RAYON_NUM_THREADS=1 python bench/tokenizer_json_hf.py TOKENIZER_JSON [CORPUS] [REPS]

Prints the median of REPS (default 5) encodes after one warm-up, two ways: the text as one
string (the benchmark's way; the token count must equal its `tokens` counter), and its lines
through encode_batch (the library's faster path on one thread; the count differs by the
pieces that would span a line break).
"""

import statistics
import sys
import time

from tokenizers import Tokenizer


def main():
    path = sys.argv[1]
    corpus = sys.argv[2] if len(sys.argv) > 2 else "data/assets/austen.txt"
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    with open(corpus, "rb") as f:
        text = f.read()[: 1 << 20].decode("utf-8", errors="ignore")
    tok = Tokenizer.from_file(path)
    ids = tok.encode(text, add_special_tokens=False).ids
    lines = text.splitlines(keepends=True)
    batch = sum(len(e.ids) for e in tok.encode_batch(lines, add_special_tokens=False))
    for name, run, count in [("one_string", lambda: tok.encode(text, add_special_tokens=False),
                              len(ids)),
                             ("lines_batch",
                              lambda: tok.encode_batch(lines, add_special_tokens=False), batch)]:
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
        print(f"RESULT arm=tokenizers.{name} median_ms={statistics.median(times) * 1e3:.1f} "
              f"tokens={count} reps={reps}")


if __name__ == "__main__":
    main()
