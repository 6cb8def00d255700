#!/usr/bin/env python3
"""Golden data pinning fitgrad's tokenizer.json reader (data/hf_tokenizer.h) to Hugging Face's
`tokenizers` library: small byte-level BPE tokenizers trained on Austen with the pipelines of
Llama 3 and SmolLM, saved by `tokenizers`, and the ids and decoded texts `tokenizers` gives
for a fixture set of texts.

How to run (CI does NOT run this; it only reads the committed tests/golden/hf_tokenizers/):

    /usr/bin/python3 -m venv /tmp/tokvenv
    /tmp/tokvenv/bin/pip install tokenizers==0.20.3
    /tmp/tokvenv/bin/python tests/golden/gen_hf_tokenizer_golden.py [--out DIR]

Writes DIR (default tests/golden/hf_tokenizers/):
  llama3_style/tokenizer.json
      BPE trained by BpeTrainer (vocab 700, ByteLevel's 256-character initial alphabet) on
      the first 4,000 lines of data/assets/austen.txt and 8,000 dated lines (so that it learns digit merges), with Llama 3's pipeline: pre_tokenizer Sequence[Split(Llama 3's
      pattern, Isolated), ByteLevel(add_prefix_space=False, use_regex=False)], decoder
      ByteLevel, post_processor TemplateProcessing "<|begin_of_text|> $A", ignore_merges True;
      special tokens <|begin_of_text|>, <|end_of_text|>, <|eot_id|> and the non-special
      added token <tool>. Two whole words are then added to the model's vocab without merges
      ("Ġxyzzy", "Ġplugh"), so that ignore_merges decides their ids. tokenizers 0.20 saves the
      merges as ["a", "b"] pairs.
  llama3_style/tokenizer_config.json
      bos_token "<|begin_of_text|>", eos_token {"content": "<|eot_id|>", ...} (both spellings).
  smollm_style/tokenizer.json
      the same corpus and size with SmolLM's pipeline: Sequence[Digits(individual_digits=True),
      ByteLevel(add_prefix_space=False, use_regex=True)], post_processor ByteLevel, special
      token <|endoftext|>; merges rewritten as "a b" strings (the older spelling).
  qwen2_style/tokenizer.json
      the same with Qwen2's: normalizer NFC, Sequence[Split(Qwen2's pattern, Isolated),
      ByteLevel without regex], post_processor ByteLevel, special tokens <|endoftext|>,
      <|im_start|>, <|im_end|>.
  fixtures.json
      {"texts": [...], "llama3_style": [{"ids": [...], "decoded": "..."}], "smollm_style": [...]}:
      encode(text, add_special_tokens=False) and decode(ids, skip_special_tokens=False) for
      each text: English prose, contractions in both cases, long digit runs, white-space runs
      and line breaks, Chinese, Russian, Arabic, emoji (a ZWJ sequence included), bytes of
      every length class, and special and added tokens inside text.
"""

import argparse
import json
import os

from tokenizers import (Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                        processors, trainers)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(HERE, "hf_tokenizers")
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
VOCAB = 700

TEXTS = [
    "It is a truth universally acknowledged, that a single man in possession of a good "
    "fortune, must be in want of a wife.",
    "I'M sure you'll SEE it's what they'd DONE; we've I'd",
    "In 1811 there were 12345678901234567890 pounds, 3.14159 and 007.",
    "  leading spaces\n\n\ttabs\r\n  and   runs   \n",
    "中文文本，还有标点。",
    "Русский текст с пунктуацией.",
    "نص عربي قصير",
    "emoji 👍🏽 and 👨‍👩‍👧 family 🎉!!",
    "xyzzy plugh xyzzyplugh",
    "<|begin_of_text|>Hello<|eot_id|> again <tool>call</tool><|end_of_text|>",
    "ends with space ",
    "decomposed: cafe\u0301 re\u0301sume\u0301, A\u030A, \u212B, e\u0302\u0323, \u1100\u1161",
    "",
]


def austen():
    with open(os.path.join(ROOT, "data", "assets", "austen.txt"), encoding="utf-8") as f:
        return f.read()


def train(tok, specials):
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    # Austen has few numbers: dated lines give the trainer digit merges, so that the digit
    # rules of the pre-tokenizers (groups of three, or each digit alone) decide ids.
    dates = [f"In {year} there were {year * 7 % 1000} pounds and {year % 97} guineas."
             for year in range(1700, 1900)]
    tok.train_from_iterator(austen().splitlines()[:4000] + dates * 40, trainer=trainer)
    return tok


def llama3_style():
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    train(tok, ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"])
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[
            ("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])
    tok.add_tokens(["<tool>"])
    # Whole words without merges: only ignore_merges makes them one token.
    j = json.loads(tok.to_str())
    for word in ["Ġxyzzy", "Ġplugh"]:
        j["model"]["vocab"][word] = len(j["model"]["vocab"])
    # The added tokens follow the model's vocabulary: renumber them after the new words.
    n = len(j["model"]["vocab"])
    specials = [t for t in j["added_tokens"] if t["id"] >= n - 2]
    for k, t in enumerate(sorted(specials, key=lambda t: t["id"])):
        t["id"] = n + k
    return Tokenizer.from_str(json.dumps(j))


def smollm_style():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return train(tok, ["<|endoftext|>"])


def qwen2_style():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return train(tok, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])


def golden(tok):
    out = []
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=False).ids
        out.append({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    fixtures = {"texts": TEXTS}
    for name, make in [("llama3_style", llama3_style), ("smollm_style", smollm_style),
                       ("qwen2_style", qwen2_style)]:
        tok = make()
        folder = os.path.join(args.out, name)
        os.makedirs(folder, exist_ok=True)
        j = json.loads(tok.to_str())
        if name == "smollm_style":
            j["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m
                                    for m in j["model"]["merges"]]
            tok = Tokenizer.from_str(json.dumps(j))
        with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False, indent=1)
        fixtures[name] = golden(tok)
        print(name, len(j["model"]["vocab"]), "tokens,", len(j["model"]["merges"]), "merges")
    with open(os.path.join(args.out, "llama3_style", "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|begin_of_text|>",
                   "eos_token": {"content": "<|eot_id|>", "lstrip": False, "rstrip": False,
                                 "normalized": False, "single_word": False, "special": True},
                   "tokenizer_class": "PreTrainedTokenizerFast"}, f, indent=1)
    with open(os.path.join(args.out, "fixtures.json"), "w", encoding="utf-8") as f:
        json.dump(fixtures, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
