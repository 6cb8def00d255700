"""The table and ratio of a comparison run whose arms alternated (issue 60): reads the logs a
driver left in OUT and prints, per round, each arm's rate and fitgrad / reference, then the
medians over the rounds.

  python bench/arm_summary.py sft|dpo|generate|eval OUT

It reads logs named ARM-MODE-ROUND.log (fg-packed-1.log, trl-packed-1.log, ...), as
bench/sft/sft_runs.sh, bench/preference/dpo_runs.sh and bench/smollm2_inference_runs.sh
write them; standard library only.

Note [fitgrad's steady rate from stamped lines]
The reference arms time their steps themselves (a callback, steps 2 on: *_steady). fitgrad's
metrics.jsonl has each step's tokens_per_second but not its seconds, and with packed
preference batches the positions of a step vary, so the drivers prefix every line of a
fitgrad run with the wall clock ($EPOCHREALTIME) as it is printed (`--progress plain
--logging_steps 1` flushes a line per step). The time from the line of step 1 to that of the
last step is the time of steps 2 to N, loading their batches and logging included (the
reference arms' callbacks leave loading out, so the ratio does not favour fitgrad). The work
of those steps: DPO, their pairs (batch x steps); SFT, their example tokens, taken as the
training set's mean example tokens per row (the packing line's share of rows x --seq_len that
are the examples') times the rows a step takes (batch): an average over the set, where the
TRL arm counts its batches' own tokens.
"""
import glob
import os
import re
import statistics
import sys


def stamped(path):
    """(seconds, text) of each line of a log a driver stamped."""
    out = []
    for line in open(path, encoding="utf-8", errors="replace"):
        t, _, text = line.rstrip("\n").partition(" ")
        try:
            out.append((float(t), text))
        except ValueError:
            out.append((None, line.rstrip("\n")))
    return out


def fitgrad_steady(path):
    """(steps after the first, their seconds, the packing line's example share) of a fitgrad
    train log (Note [fitgrad's steady rate from stamped lines])."""
    lines = stamped(path)
    steps = [(t, int(m.group(1))) for t, text in lines
             if (m := re.match(r"step (\d+)/\d+ \|", text))]
    share = next((float(m.group(1)) / 100 for _, text in lines
                  if (m := re.search(r"of the computed tokens ([\d.]+)% are the examples'", text))),
                 None)
    if len(steps) < 2:
        sys.exit(f"{path}: fewer than two step lines (STEPS must be at least 2)")
    (t0, s0), (t1, s1) = steps[0], steps[-1]
    return s1 - s0, t1 - t0, share


def result(path, key):
    """A key=value of the RESULT line of a log."""
    for _, text in stamped(path):
        if text.startswith("RESULT "):
            kv = dict(f.split("=", 1) for f in text.split()[1:] if "=" in f)
            return float(kv[key])
    sys.exit(f"{path}: no RESULT line (see the log)")


def flag(path, name, default):
    m = re.search(rf"--{name} (\S+)", open(path, encoding="utf-8", errors="replace").read())
    return int(m.group(1)) if m else default


def rounds(out, arm, mode):
    found = {}
    for path in glob.glob(os.path.join(out, f"{arm}-{mode}-*.log")):
        found[int(re.search(r"-(\d+)\.log$", path).group(1))] = path
    return found


def table(title, unit, rows):
    """rows: (mode, round, fitgrad rate, reference rate)."""
    print(f"\n{title}\n")
    print(f"| mode | round | fitgrad {unit} | reference {unit} | fitgrad / reference |")
    print("|---|---|---|---|---|")
    for mode, r, f, ref in rows:
        print(f"| {mode} | {r} | {f:.2f} | {ref:.2f} | {f / ref:.2f} |")
    for mode in dict.fromkeys(m for m, *_ in rows):
        fs = [f for m, _, f, _ in rows if m == mode]
        refs = [ref for m, _, _, ref in rows if m == mode]
        ratios = [f / ref for m, _, f, ref in rows if m == mode]
        print(f"| {mode} | median | {statistics.median(fs):.2f} | {statistics.median(refs):.2f} "
              f"| {statistics.median(ratios):.2f} (rounds {min(ratios):.2f}-{max(ratios):.2f}) |")


def train_rows(out, kind):
    rows = []
    modes = sorted({os.path.basename(p).split("-")[1] for p in glob.glob(f"{out}/fg-*-*.log")})
    for mode in modes:
        fg, ref = rounds(out, "fg", mode), rounds(out, "trl", mode)
        for r in sorted(set(fg) & set(ref)):
            n, seconds, share = fitgrad_steady(fg[r])
            if kind == "sft":
                batch = flag(fg[r], "per_device_train_batch_size", 4)
                seq_len = flag(fg[r], "seq_len", 256)
                rate = share * batch * seq_len * n / seconds
                rows.append((mode, r, rate, result(ref[r], "example_tokens_per_second_steady")))
            else:
                batch = flag(fg[r], "per_device_train_batch_size", 2)
                rows.append((mode, r, batch * n / seconds,
                             result(ref[r], "pairs_per_second_steady")))
    return rows


def inference_rows(out, kind):
    rows = []
    fg, ref = rounds(out, "fg", kind), rounds(out, "hf", kind)
    for r in sorted(set(fg) & set(ref)):
        text = open(fg[r], encoding="utf-8", errors="replace").read()
        if kind == "generate":
            m = re.search(r"decode: ([\d.]+) tokens/s", text)
            rows.append((kind, r, float(m.group(1)), result(ref[r], "decode_tokens_per_s")))
        else:
            m = re.search(r"\(([\d.]+) tokens/s\)", text)
            rows.append((kind, r, float(m.group(1)), result(ref[r], "tokens_per_s")))
    return rows


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("sft", "dpo", "generate", "eval"):
        sys.exit(__doc__.split("\n\n")[1])
    kind, out = sys.argv[1], sys.argv[2]
    if kind == "sft":
        rows = train_rows(out, kind)
        title, unit = "SFT, example tokens per second (steps 2 on)", "tokens/s"
    elif kind == "dpo":
        rows = train_rows(out, kind)
        title, unit = "DPO, pairs per second (steps 2 on)", "pairs/s"
    elif kind == "generate":
        rows = inference_rows(out, kind)
        title, unit = "generate, decode tokens per second", "tokens/s"
    else:
        rows = inference_rows(out, kind)
        title, unit = "eval, scored tokens per second (windows only)", "tokens/s"
    if not rows:
        sys.exit(f"{out}: no pair of fitgrad and reference logs")
    table(title, unit, rows)


if __name__ == "__main__":
    main()
