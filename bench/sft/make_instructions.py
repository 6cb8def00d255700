#!/usr/bin/env python3
"""Builds the SFT instruction set of issue 41 from the two public-domain corpora.

    python3 bench/sft/make_instructions.py [AUSTEN [MOBYDICK]] [--out DIR]

AUSTEN and MOBYDICK default to data/assets/{austen,mobydick}.txt. DIR defaults to
bench/sft/instructions/ beside this script. Standard library only (Python 3.11); the output
depends only on the two files and --seed, so a rerun rewrites the same bytes (the SHA-256 of
each input and output is printed).

How it is made
--------------
1. Books. austen.txt holds six novels, each starting at a title line (EMMA, MANSFIELD PARK,
   NORTHANGER ABBEY, Persuasion, PRIDE AND PREJUDICE, SENSE AND SENSIBILITY); each book's text
   runs from its first "Chapter 1" / "CHAPTER I" heading to its end marker (FINIS, THE END,
   A NOTE ON THE TEXT) or the next title, so prefaces and notes are left out. mobydick.txt
   gives Moby-Dick from "CHAPTER 1. Loomings." to the Project Gutenberg end line (the
   licence, ETYMOLOGY and EXTRACTS are left out). Seven books in all.
2. Paragraphs. Blank-line separated blocks, lines joined, italics underscores removed,
   whitespace collapsed. Kept: 30 to 140 words, not a heading, not an indented verse block.
   Sentences are split at . ! ? (with closing quotes) before a capital or a quote, not after
   Mr. Mrs. Dr. St. and the like. A sentence asked about alone loses a lone quote mark at
   either end.
3. Split. A paragraph is held out when the first byte of the SHA-256 of its text is below
   26 (about 10%): held-out examples never share a paragraph (or sentence of one) with the
   training examples, and the split does not depend on the sampling below.
4. Tasks. Each example draws a book (uniformly among the seven), then an unused paragraph of
   that book's pool (no paragraph serves two examples of any file), then a task:
     continue   (30%) "Continue the passage with its next sentence." + the paragraph's first
                sentences (at least 25 words) -> the next sentence of the paragraph.
     book       (24%) "Which book is this passage from?" + the paragraph -> its title
                ("Pride and Prejudice", "Moby-Dick", ...).
     last_word  (12%) "What is the last word of the following passage?" + the paragraph ->
                that word without punctuation.
     count      (10%) "How many words are in the following sentence?" + a sentence of 5 to
                25 words -> the number of its space-separated words.
     reverse    (10%) "Reverse the order of the words ..." + a sentence of 4 to 12 words ->
                the same words in reverse order, each as written.
     two_turn   (14%) user: the first sentences + "Which book is it from?"; assistant: the
                title; user: "Now continue the passage with its next sentence."; assistant:
                the next sentence. Two assistant turns: --train_on assistant learns both,
                --train_on last only the second.
   Each task has two phrasings (instruction before or after the passage). A quarter of the
   conversations start with a system message of their own; the rest get the chat template's
   default one (SmolLM2's template writes "You are a helpful AI assistant named SmolLM...").
5. Files (in DIR):
     train.jsonl        2000 conversations, {"messages": [{"role", "content"}, ...]}.
     heldout.jsonl      200 conversations of the same mix from the held-out paragraphs.
     alpaca.jsonl       300 single-turn examples {"instruction", "input", "output"} from
                        training-side paragraphs that train.jsonl does not use.
     eval_prompts.jsonl 8 held-out conversations without their last answer (the messages end
                        with a user turn), for sample answers: {"messages": [...]} plus
                        "task" and "expected" (the answer the held-out record had).

Why it tests the masking
------------------------
Every answer is short and derivable from its prompt (a title, a word, a number, the reversed
words, or one sentence that follows the given ones), while the prompts are long passages of
19th-century prose. In SmolLM2's chat template train.jsonl is 251,594 tokens (125.8 a record,
the longest 248, so --seq_len 256 cuts none), of which --train_on assistant trains 30,923
(12.3%) and --train_on last 29,259: about 88% of the tokens are prompt and template. They are
hard to predict (SmolLM2-135M-Instruct scores held-out Austen at 3.45 nats a token,
bench/RESULTS.md) and carry nothing the task needs. Trained with --train_on assistant, the
held-out response loss (the loss of the assistant tokens only) should fall fast and far: titles,
last words and reversed words become near-certain. Trained on every token (--train_on all, or a
masking bug), the prose dominates the gradient and the mean loss: the reported loss stays near
the prose's, and the response loss falls less per step. A mask that is off by a token shows as
well: the answers are a few tokens long, so a wrongly trained or untrained
"<|im_start|>assistant" header or "<|im_end|>" moves the response loss visibly. The two-turn
conversations tell assistant from last.
"""
import argparse
import hashlib
import json
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

AUSTEN_TITLES = {  # the title line in austen.txt -> the title as an answer
    "EMMA": "Emma",
    "MANSFIELD PARK": "Mansfield Park",
    "NORTHANGER ABBEY": "Northanger Abbey",
    "PERSUASION": "Persuasion",
    "PRIDE AND PREJUDICE": "Pride and Prejudice",
    "SENSE AND SENSIBILITY": "Sense and Sensibility",
}
MOBY_DICK = "Moby-Dick"

N_TRAIN, N_HELDOUT, N_ALPACA, N_EVAL = 2000, 200, 300, 8
HELDOUT_BYTE = 26  # a paragraph is held out when sha256(text)[0] < 26: about 10%
MIN_WORDS, MAX_WORDS = 30, 140

SYSTEM = "You are a careful reader of classic novels. Answer exactly and briefly."

# task -> (weight, phrasings); "{p}" is the passage or sentence.
TASKS = {
    "continue": (30, [
        "Continue the passage with its next sentence.\n\n{p}",
        "{p}\n\nWrite the sentence that comes next in this passage.",
    ]),
    "book": (24, [
        "Which book is this passage from? Answer with the title only.\n\n{p}",
        "{p}\n\nName the novel this passage comes from. Give only the title.",
    ]),
    "last_word": (12, [
        "What is the last word of the following passage? Answer with the word only, without "
        "punctuation.\n\n{p}",
        "{p}\n\nWhich word ends this passage? Reply with that word alone, no punctuation.",
    ]),
    "count": (10, [
        "How many words are in the following sentence? Count the words separated by spaces and "
        "answer with a number only.\n\n{p}",
        "{p}\n\nCount the space-separated words of the sentence above. Reply with the number.",
    ]),
    "reverse": (10, [
        "Reverse the order of the words in the following sentence. Keep each word exactly as "
        "written, punctuation included.\n\n{p}",
        "{p}\n\nWrite the words of this sentence in reverse order, each word unchanged.",
    ]),
    "two_turn": (14, [
        "Here is a passage:\n\n{p}\n\nWhich book is it from? Answer with the title only.",
        "{p}\n\nFrom which novel is this? Just the title, please.",
    ]),
}
SECOND_TURN = "Now continue the passage with its next sentence."

ABBREVIATIONS = {"mr", "mrs", "dr", "st", "capt", "col", "messrs", "esq", "sq", "no", "viz",
                 "ie", "eg", "gen", "lt", "rev", "sir"}


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def default_corpus(name):
    return os.path.join(REPO, "data", "assets", name)


def paragraphs(lines):
    """Blank-line separated blocks of `lines` as normalized paragraphs that qualify."""
    out, block = [], []
    for line in lines + [""]:
        if line.strip():
            block.append(line)
            continue
        if block:
            indented = sum(1 for b in block if b.startswith("  ")) * 2 > len(block)
            text = " ".join(b.strip() for b in block).replace("_", "")
            text = re.sub(r"\s+", " ", text).strip()
            n = len(text.split())
            heading = re.match(r"(?i)^(chapter|volume|book)\b", text) or text.upper() == text
            if not indented and not heading and MIN_WORDS <= n <= MAX_WORDS:
                out.append(text)
            block = []
    return out


def books(austen_path, moby_path):
    """[(title, [paragraph, ...])] for the six Austen novels and Moby-Dick."""
    with open(austen_path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    starts = [(i, AUSTEN_TITLES[l.strip().upper()]) for i, l in enumerate(lines)
              if l.strip().upper() in AUSTEN_TITLES]
    if sorted(t for _, t in starts) != sorted(AUSTEN_TITLES.values()):
        sys.exit(f"{austen_path}: expected one title line for each of "
                 f"{sorted(AUSTEN_TITLES)}, found {[t for _, t in starts]}")
    result = []
    for k, (start, title) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        body = lines[start:end]
        first = next((i for i, l in enumerate(body) if re.match(r"(?i)^chapter (1|i)\s*$", l)),
                     None)
        if first is None:
            sys.exit(f"{austen_path}: no first chapter heading in {title}")
        body = body[first:]
        stop = next((i for i, l in enumerate(body)
                     if re.match(r"(?i)^(finis|the end|a note on the text)\s*$", l.strip())),
                    len(body))
        result.append((title, paragraphs(body[:stop])))
    with open(moby_path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    first = next((i for i, l in enumerate(lines) if l.startswith("CHAPTER 1. Loomings")), None)
    last = next((i for i, l in enumerate(lines) if l.startswith("*** END OF")), len(lines))
    if first is None:
        sys.exit(f"{moby_path}: no 'CHAPTER 1. Loomings.' line")
    result.append((MOBY_DICK, paragraphs(lines[first:last])))
    return result


def sentences(text):
    """The sentences of a paragraph: cut after . ! ? (and closing quotes) before a capital or
    an opening quote, except after an abbreviation such as Mr."""
    out, start = [], 0
    for m in re.finditer(r"[.!?][\"')\]]*\s+(?=[\"'(A-Z])", text):
        word = text[start:m.start() + 1].split()[-1]
        if text[m.start()] == "." and re.sub(r"[^a-z]", "", word.lower()) in ABBREVIATIONS:
            continue
        out.append(text[start:m.end()].strip())
        start = m.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


def held_out(text):
    return hashlib.sha256(text.encode("utf-8")).digest()[0] < HELDOUT_BYTE


def continuation(rng, text):
    """(prefix, next sentence) from a paragraph, or None: the prefix is the first sentences
    (at least 25 words), the answer the sentence that follows (4 to 45 words)."""
    ss = sentences(text)
    options = []
    for k in range(1, len(ss)):
        prefix = " ".join(ss[:k])
        if len(prefix.split()) >= 25 and 4 <= len(ss[k].split()) <= 45:
            options.append((prefix, ss[k]))
    return rng.choice(options) if options else None


def pick_sentence(rng, text, lo, hi):
    """A sentence of lo to hi words, without a lone quote mark at either end (a sentence cut
    from inside a quotation), or None."""
    options = []
    for s in sentences(text):
        if s.count('"') % 2:
            s = s.strip('"').strip()
        if s.count('"') % 2 == 0 and lo <= len(s.split()) <= hi:
            options.append(s)
    return rng.choice(options) if options else None


def make_task(rng, task, title, text):
    """(users, answers, (instruction, passage)) for one task on one paragraph, or None when the
    paragraph does not suit the task: a single-turn task has one user prompt and one answer,
    two_turn two of each. (instruction, passage) is the first prompt's two parts."""
    phrasing = rng.choice(TASKS[task][1])
    instruction = phrasing.replace("{p}", "").strip()
    if task in ("continue", "two_turn"):
        c = continuation(rng, text)
        if not c:
            return None
        passage, answers = c[0], [c[1]] if task == "continue" else [title, c[1]]
    elif task == "book":
        passage, answers = text, [title]
    elif task == "last_word":
        word = re.sub(r"^\W+|\W+$", "", text.split()[-1])
        if not word:
            return None
        passage, answers = text, [word]
    elif task == "count":
        passage = pick_sentence(rng, text, 5, 25)
        answers = passage and [str(len(passage.split()))]
    elif task == "reverse":
        passage = pick_sentence(rng, text, 4, 12)
        answers = passage and [" ".join(reversed(passage.split()))]
    else:
        raise ValueError(task)
    if not passage:
        return None
    users = [phrasing.format(p=passage)] + ([SECOND_TURN] if task == "two_turn" else [])
    return users, answers, (instruction, passage)


def draw(rng, pools, used, n, tasks):
    """n examples as (task, title, users, answers, parts), each from an unused paragraph."""
    names = list(tasks)
    weights = [TASKS[t][0] for t in names]
    out = []
    while len(out) < n:
        task = rng.choices(names, weights)[0]
        title, pool = rng.choice(pools)
        free = [i for i in range(len(pool)) if (title, i) not in used]
        if not free:
            sys.exit(f"the {title} pool ran out of paragraphs")
        for _ in range(8):  # a few paragraphs until one suits the task
            i = rng.choice(free)
            made = make_task(rng, task, title, pool[i])
            if made:
                used.add((title, i))
                out.append((task, title) + made)
                break
    return out


def messages(rng, users, answers):
    msgs = [{"role": "system", "content": SYSTEM}] if rng.random() < 0.25 else []
    for u, a in zip(users, answers):
        msgs += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
    return msgs


def write_jsonl(path, records):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("austen", nargs="?", default=default_corpus("austen.txt"))
    p.add_argument("mobydick", nargs="?", default=default_corpus("mobydick.txt"))
    p.add_argument("--out", default=os.path.join(HERE, "instructions"))
    p.add_argument("--seed", type=int, default=41)
    a = p.parse_args()

    all_books = books(a.austen, a.mobydick)
    train_pools = [(t, [x for x in ps if not held_out(x)]) for t, ps in all_books]
    heldout_pools = [(t, [x for x in ps if held_out(x)]) for t, ps in all_books]
    for (t, tr), (_, ho) in zip(train_pools, heldout_pools):
        print(f"{t}: {len(tr)} training-side and {len(ho)} held-out paragraphs")

    rng = random.Random(a.seed)
    used_train, used_heldout = set(), set()
    train = [messages(rng, u, ans) for _, _, u, ans, _ in
             draw(rng, train_pools, used_train, N_TRAIN, TASKS)]
    heldout_drawn = draw(rng, heldout_pools, used_heldout, N_HELDOUT, TASKS)
    heldout = [messages(rng, u, ans) for _, _, u, ans, _ in heldout_drawn]
    single = [t for t in TASKS if t != "two_turn"]
    alpaca = [{"instruction": parts[0], "input": parts[1], "output": answers[0]}
              for _, _, _, answers, parts in draw(rng, train_pools, used_train, N_ALPACA, single)]

    # Sample prompts: one held-out record of each task, then two more continue / book ones.
    wanted = list(TASKS) + ["continue", "book"]
    evals, taken = [], set()
    for task in wanted:
        k = next(i for i, d in enumerate(heldout_drawn) if d[0] == task and i not in taken)
        taken.add(k)
        msgs = heldout[k]
        evals.append({"messages": msgs[:-1], "task": task, "expected": msgs[-1]["content"]})

    os.makedirs(a.out, exist_ok=True)
    files = {"train.jsonl": [{"messages": m} for m in train],
             "heldout.jsonl": [{"messages": m} for m in heldout],
             "alpaca.jsonl": alpaca, "eval_prompts.jsonl": evals[:N_EVAL]}
    for name, records in files.items():
        write_jsonl(os.path.join(a.out, name), records)
    print(f"inputs: {a.austen} sha256 {sha256_file(a.austen)}")
    print(f"        {a.mobydick} sha256 {sha256_file(a.mobydick)}")
    for name, records in files.items():
        path = os.path.join(a.out, name)
        print(f"{path}: {len(records)} records, {os.path.getsize(path)} bytes, sha256 "
              f"{sha256_file(path)[:16]}")


if __name__ == "__main__":
    main()
