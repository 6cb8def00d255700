#!/usr/bin/env python3
"""Writes the arithmetic word-problem task of issue 59 (GRPO with a verifiable reward).

Every problem is one addition or subtraction of a number from 1 to 20 and one from 1 to 9,
dressed as a short story or asked directly; its `answer` is the exact integer result (never
negative). The numbers are small so that SmolLM2-135M-Instruct gets some right before any
training (GRPO learns only from groups whose rewards differ). The two splits are
disjoint (no problem text appears in both). Deterministic: Python's random.Random(seed)
only, so the committed files are this script's output byte for byte:

    python3 data/tasks/arithmetic/gen_arithmetic.py            # rewrites train/heldout
    python3 data/tasks/arithmetic/gen_arithmetic.py --check    # exit 1 if they differ

Rows are TRL's conversational prompt-only format: {"prompt": [{"role": "user", "content":
...}], "answer": "<integer>"}. Standard library only (Debian's python3).
"""
import argparse
import json
import os
import random
import sys

SEED = 59
TRAIN, HELDOUT = 500, 100

NAMES = ["Anna", "Ben", "Clara", "David", "Emma", "Felix", "Grace", "Henry", "Iris",
         "Jack", "Lena", "Max", "Nora", "Oscar", "Paula", "Sam"]
THINGS = ["apples", "books", "marbles", "stickers", "pencils", "coins", "cookies",
          "shells", "cards", "stamps", "eggs", "balloons"]

# (operation, template); {n} a name, {x} a plural noun, {a} and {b} the numbers.
TEMPLATES = [
    ("+", "{n} has {a} {x}. {n} gets {b} more {x}. How many {x} does {n} have now?"),
    ("+", "There are {a} {x} in a box and {b} {x} on the table. How many {x} are there in all?"),
    ("+", "{n} collected {a} {x} on Monday and {b} {x} on Tuesday. How many {x} did {n} "
          "collect in total?"),
    ("+", "What is {a} plus {b}?"),
    ("-", "{n} has {a} {x}. {n} gives away {b} {x}. How many {x} does {n} have left?"),
    ("-", "There were {a} {x} in a jar. {b} {x} were taken out. How many {x} are in the jar now?"),
    ("-", "{n} had {a} {x} and lost {b} of them. How many {x} does {n} still have?"),
    ("-", "What is {a} minus {b}?"),
]

INSTRUCTION = " Answer with the final number only."


def problem(rng):
    op, template = rng.choice(TEMPLATES)
    a, b = rng.randint(1, 20), rng.randint(1, 9)
    if op == "-" and b > a:
        a, b = b, a
    text = template.format(n=rng.choice(NAMES), x=rng.choice(THINGS), a=a, b=b)
    return text + INSTRUCTION, a + b if op == "+" else a - b


def rows(seed):
    rng = random.Random(seed)
    seen, out = set(), []
    while len(out) < TRAIN + HELDOUT:
        text, answer = problem(rng)
        if text in seen:
            continue
        seen.add(text)
        out.append({"prompt": [{"role": "user", "content": text}], "answer": str(answer)})
    return out[:TRAIN], out[TRAIN:]


def render(split):
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in split)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    train, heldout = rows(SEED)
    stale = []
    for name, split in (("train.jsonl", train), ("heldout.jsonl", heldout)):
        path = os.path.join(here, name)
        text = render(split)
        if args.check:
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    stale.append(path)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    if stale:
        sys.exit(f"stale: {', '.join(stale)}; rerun {sys.argv[0]}")


if __name__ == "__main__":
    main()
