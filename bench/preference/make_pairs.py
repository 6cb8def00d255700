#!/usr/bin/env python3
"""Builds the preference pairs of the DPO benchmark from the seven public-domain books.

    python3 bench/preference/make_pairs.py [AUSTEN [MOBYDICK]] [--out DIR] [--seed N]

AUSTEN and MOBYDICK default to the corpora bench/sft/make_instructions.py reads
(data/assets/{austen,mobydick}.txt).
DIR defaults to bench/preference/pairs/ beside this script. Standard library only (Python 3.11);
the output depends only on the two files and --seed, so a rerun rewrites the same bytes (the
SHA-256 of each input and output is printed).

How it is made
--------------
1. Books, paragraphs, sentences and the held-out split are make_instructions.py's (imported, not
   copied): the six Austen novels and Moby-Dick, paragraphs of 30 to 140 words, sentences cut at
   . ! ? before a capital or a quote, and a paragraph held out when the first byte of the SHA-256
   of its text is below 26 (about 10%).
2. Pairs. Each pair draws a task, a book (uniformly among the seven) and an unused paragraph of
   that book; no paragraph serves twice in either file, and the held-out file uses held-out
   paragraphs only (the rejected sentences of task "other_book" included), the training file
   training-side paragraphs only. Every prompt is one user message with at most 120 words of
   passage, in one of make_instructions.py's two phrasings of its task:
     shuffled    (35%) "Continue the passage with its next sentence." + the paragraph's first
                 sentences (25 to 120 words) -> chosen: the next sentence (4 to 45 words, at most
                 130 words with the passage); rejected: the same words in an order shuffled by
                 the seeded generator (a pair whose shuffle leaves the sentence as it was is not
                 made; another paragraph is drawn).
     other_book  (30%) the same prompt -> chosen: the next sentence; rejected: a sentence of
                 about the same length (within max(2, n/5) words of the chosen n) from an unused
                 paragraph of a different book, that paragraph then used.
     title       (35%) "Which book is this passage from?" + the paragraph (at most 120 words) ->
                 chosen: its title ("Pride and Prejudice", "Moby-Dick", ...); rejected: one of
                 the six other titles.
3. Files (in DIR), one JSON object a line in TRL's explicit-prompt conversational preference
   format, the keys in this order and no others:
     {"prompt": [{"role": "user", "content": ...}],
      "chosen": [{"role": "assistant", "content": ...}],
      "rejected": [{"role": "assistant", "content": ...}]}
     train.jsonl    600 pairs from training-side paragraphs.
     heldout.jsonl  100 pairs of the same mix from held-out paragraphs.
   In SmolLM2's chat template (its ~25-token default system message included) TRL's rows
   (prompt + answer + the eos TRL appends) are 84 to 222 tokens in train.jsonl (130.7 a row,
   156,882 in its 1200 rows) and 82 to 207 in heldout.jsonl, so --seq_len 256 cuts none.

Why it tests preference learning
--------------------------------
The chosen and rejected answers of a pair share their prompt and are of about the same length
(the same words, a sentence within a fifth of its length, or a title), so a pair's margin
measures what the policy prefers, not how long the answer is. Each rejected answer is a
plausible-length corruption that a reader of the prompt can rule out: word salad in place of
English, a sentence in another book's voice and world (a harpooneer in Highbury), or a wrong
title. SmolLM2-135M-Instruct itself gives the chosen answer the higher log-probability in 65 of
the 100 held-out pairs: all 39 shuffled ones, about half of the other_book ones and fewer than
half of the titles, so there is room to learn, and the tasks differ in difficulty (fluency is
there already, book identity is not). DPO's implicit reward is beta * (log pi(chosen) -
log pi_ref(chosen)) - the same for rejected: at step 0 policy and reference are one model and
every reward is 0 (reward accuracy 0, TRL counting strictly greater), and as the policy learns
fluent continuations in each book's style and which book a passage comes from, the reward
accuracy (the share of pairs whose chosen reward beats the rejected) rises. Measured on
heldout.jsonl, pairs from paragraphs the training never saw, it should rise toward 1 when the
policy generalizes and stay near chance when it only memorizes the training pairs.
"""
import argparse
import collections
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "sft"))
import make_instructions as mi  # noqa: E402  (books, sentences, held_out, phrasings, files)

N_TRAIN, N_HELDOUT = 600, 100
MAX_PASSAGE_WORDS = 120  # words of passage in a prompt
MAX_PAIR_WORDS = 130     # passage + chosen sentence of a continuation pair
MIN_PREFIX_WORDS = 25
ANSWER_WORDS = (4, 45)   # a continuation's next sentence

TASKS = {"shuffled": 35, "other_book": 30, "title": 35}  # task -> weight
PHRASINGS = {"shuffled": mi.TASKS["continue"][1], "other_book": mi.TASKS["continue"][1],
             "title": mi.TASKS["book"][1]}


def n_words(text):
    return len(text.split())


def continuation(rng, sentences):
    """(passage, next sentence) from a paragraph's sentences within the word budgets, or None."""
    options = []
    for k in range(1, len(sentences)):
        prefix = " ".join(sentences[:k])
        p, a = n_words(prefix), n_words(sentences[k])
        if (MIN_PREFIX_WORDS <= p <= MAX_PASSAGE_WORDS and ANSWER_WORDS[0] <= a <= ANSWER_WORDS[1]
                and p + a <= MAX_PAIR_WORDS):
            options.append((prefix, sentences[k]))
    return rng.choice(options) if options else None


def shuffled(rng, sentence):
    """The sentence's words in a shuffled order, or None when the shuffle left it unchanged."""
    words = sentence.split()
    rng.shuffle(words)
    out = " ".join(words)
    return None if out == " ".join(sentence.split()) else out


def similar_length(n, m):
    return abs(n - m) <= max(2, n // 5)


class Side:
    """The paragraphs of one file's side of the split, their sentences, and those used."""

    def __init__(self, all_books, held):
        self.pools = [(t, [p for p in ps if mi.held_out(p) == held]) for t, ps in all_books]
        self.by_title = dict(self.pools)
        self.sentences = {(t, i): mi.sentences(p)
                          for t, ps in self.pools for i, p in enumerate(ps)}
        self.used = set()

    def free(self, title):
        pool = self.by_title[title]
        return [i for i in range(len(pool)) if (title, i) not in self.used]

    def other_sentence(self, rng, title, n):
        """(book, paragraph index, sentence) of about n words from an unused paragraph of a
        book other than `title`, or None."""
        others = [t for t, _ in self.pools if t != title]
        rng.shuffle(others)
        for other in others:
            candidates = [(other, i, s) for i in self.free(other)
                          for s in self.sentences[(other, i)]
                          if ANSWER_WORDS[0] <= n_words(s) <= ANSWER_WORDS[1]
                          and similar_length(n, n_words(s))]
            if candidates:
                return rng.choice(candidates)
        return None


def make_pair(rng, side, task, title, i):
    """(passage, chosen, rejected, extra paragraph used or None) for one task on paragraph i of
    `title`, or None when the paragraph does not suit the task."""
    text = side.by_title[title][i]
    if task == "title":
        if n_words(text) > MAX_PASSAGE_WORDS:
            return None
        wrong = rng.choice([t for t, _ in side.pools if t != title])
        return text, title, wrong, None
    c = continuation(rng, side.sentences[(title, i)])
    if not c:
        return None
    passage, answer = c
    if task == "shuffled":
        wrong = shuffled(rng, answer)
        return (passage, answer, wrong, None) if wrong else None
    found = side.other_sentence(rng, title, n_words(answer))
    if not found or found[2] == answer:
        return None
    return passage, answer, found[2], found[:2]


def draw(rng, side, n):
    """n pairs as (task, title, record), each from unused paragraphs of `side`."""
    names = list(TASKS)
    weights = [TASKS[t] for t in names]
    out = []
    while len(out) < n:
        task = rng.choices(names, weights)[0]
        title = rng.choice([t for t, _ in side.pools])
        free = side.free(title)
        if not free:
            sys.exit(f"the {title} pool ran out of paragraphs")
        for _ in range(8):  # a few paragraphs until one suits the task
            i = rng.choice(free)
            made = make_pair(rng, side, task, title, i)
            if not made:
                continue
            passage, chosen, rejected, extra = made
            side.used.add((title, i))
            if extra:
                side.used.add(extra)
            prompt = rng.choice(PHRASINGS[task]).format(p=passage)
            out.append((task, title, {"prompt": [{"role": "user", "content": prompt}],
                                      "chosen": [{"role": "assistant", "content": chosen}],
                                      "rejected": [{"role": "assistant", "content": rejected}]}))
            break
    return out


def describe(name, drawn):
    tasks = collections.Counter(t for t, _, _ in drawn)
    books = collections.Counter(b for _, b, _ in drawn)
    words = [n_words(r["prompt"][0]["content"]) +
             max(n_words(r["chosen"][0]["content"]), n_words(r["rejected"][0]["content"]))
             for _, _, r in drawn]
    print(f"{name}: {len(drawn)} pairs; tasks {dict(sorted(tasks.items()))}; books "
          f"{dict(sorted(books.items()))}; prompt + longer answer {min(words)} to {max(words)} "
          f"words, mean {sum(words) / len(words):.1f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("austen", nargs="?", default=mi.default_corpus("austen.txt"))
    p.add_argument("mobydick", nargs="?", default=mi.default_corpus("mobydick.txt"))
    p.add_argument("--out", default=os.path.join(HERE, "pairs"))
    p.add_argument("--seed", type=int, default=42)
    a = p.parse_args()

    all_books = mi.books(a.austen, a.mobydick)
    train_side, heldout_side = Side(all_books, False), Side(all_books, True)
    for (t, tr), (_, ho) in zip(train_side.pools, heldout_side.pools):
        print(f"{t}: {len(tr)} training-side and {len(ho)} held-out paragraphs")
    # One generator per file: the held-out pairs do not depend on how many training pairs
    # are drawn. (A str seed is hashed with SHA-512, the same in every run.)
    train = draw(random.Random(f"{a.seed}:train"), train_side, N_TRAIN)
    heldout = draw(random.Random(f"{a.seed}:heldout"), heldout_side, N_HELDOUT)
    describe("train", train)
    describe("heldout", heldout)

    os.makedirs(a.out, exist_ok=True)
    files = {"train.jsonl": [r for _, _, r in train], "heldout.jsonl": [r for _, _, r in heldout]}
    for name, records in files.items():
        mi.write_jsonl(os.path.join(a.out, name), records)
    print(f"inputs: {a.austen} sha256 {mi.sha256_file(a.austen)}")
    print(f"        {a.mobydick} sha256 {mi.sha256_file(a.mobydick)}")
    for name, records in files.items():
        path = os.path.join(a.out, name)
        print(f"{path}: {len(records)} pairs, {os.path.getsize(path)} bytes, sha256 "
              f"{mi.sha256_file(path)}")


if __name__ == "__main__":
    main()
