#!/usr/bin/python3
r"""Reference values of fitgrad's tokenizer tests, from independent Python implementations.

How to run (CI does NOT run this; the tests hold its output as constants):

    /usr/bin/python3 -m venv /tmp/venv-tok
    /tmp/venv-tok/bin/pip install regex==2026.11.19 tiktoken==0.14.0 tokenizers==0.23.3
    /tmp/venv-tok/bin/python tests/golden/gen_tokenizer_golden.py            # both parts
    /tmp/venv-tok/bin/python tests/golden/gen_tokenizer_golden.py --austen   # only the ids
    /tmp/venv-tok/bin/python tests/golden/gen_tokenizer_golden.py --splits   # only the table

It needs no network: every file it reads is in the checkout.

--austen: the GPT-2 token ids of the embedded corpus data/assets/austen.txt, the constants
of TokenizerGpt2.AustenIdsMatchTheReference (tests/data/bpe_tokenizer_test.cpp): the
count, the first 12 ids and the hash. Two references must agree id for id, or it fails:
  * tiktoken's "gpt2" encoding, built as tiktoken_ext.openai_public.gpt2 builds it but
    from the committed data/assets/gpt2/vocab.bpe and encoder.json (tiktoken checks both
    against the SHA-256 it pins for GPT-2's published files), encoded with encode_ordinary;
  * Hugging Face `tokenizers` (Rust): models.BPE on the same two files, with the
    ByteLevel pre-tokenizer (GPT-2's pattern, no prefix space).
The hash is FNV-1a with 64-bit FNV's published constants (offset basis
14695981039346656037, prime 1099511628211), one round per id taken whole as a 64-bit value
(not byte by byte): h = ((h XOR id) * prime) mod 2^64.

--splits: the pieces of the test texts under the four pre-tokenizers, printed as the
split_cases() function of tests/data/pretokenizer_test.cpp; the patterns are those of
Note [Pre-tokenizer patterns] (data/pretokenizer.cpp), matched by the `regex` module
(regex.findall). SmolLM's pieces are each \p{N} character alone and GPT-2's pattern on
every stretch between them. GPT-2's and SmolLM's are also checked against `tokenizers`'
own pre-tokenizers (ByteLevel; Sequence[Digits(individual_digits), ByteLevel]). Compare
with the test (clang-format lays the table out as the test does):

    /tmp/venv-tok/bin/python tests/golden/gen_tokenizer_golden.py --splits \
      | clang-format --assume-filename=x.cpp \
      | diff - <(sed -n '/^const std::vector<SplitCase>& split_cases/,/^}/p' \
                 tests/data/pretokenizer_test.cpp)
"""

import argparse
import pathlib
import sys
import unicodedata

import regex
import tiktoken
import tiktoken.load
import tokenizers
from tokenizers import decoders, models, pre_tokenizers

ROOT = pathlib.Path(__file__).resolve().parents[2]
GPT2_DIR = ROOT / "data" / "assets" / "gpt2"
AUSTEN = ROOT / "data" / "assets" / "austen.txt"

# The SHA-256 that tiktoken_ext.openai_public pins for GPT-2's published files.
VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
QWEN2_PATTERN = LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")

SPLIT_TEXTS = [
    "Hello world",
    "I'm here, they're 'RE' you'LL",
    "  two  spaces   three",
    "tab\tand\nnew\r\nline\n\n",
    "trailing   ",
    "12345 678,9",
    "x²+y³=½ Ⅻ",
    "naïve café — “quoted”",
    "\u00a0nbsp\u3000ideo\u2028sep",
    "$$$ ?!?!!! \n\n  (paren)",
    "日本語のテキスト123です",
    "emoji 😀😀 🇫🇷!",
    "'s's 'S 'll'",
    "line1\n  line2\r\n\r\n",
]


FNV_OFFSET_BASIS = 14695981039346656037
FNV_PRIME = 1099511628211


def fnv1a_ids(ids):
    h = FNV_OFFSET_BASIS
    for i in ids:
        h = ((h ^ i) * FNV_PRIME) % (1 << 64)
    return h


def tiktoken_gpt2():
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(GPT2_DIR / "vocab.bpe"),
        encoder_json_file=str(GPT2_DIR / "encoder.json"),
        vocab_bpe_hash=VOCAB_BPE_SHA256,
        encoder_json_hash=ENCODER_JSON_SHA256,
    )
    return tiktoken.Encoding(
        name="gpt2",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": 50256},
        explicit_n_vocab=50257,
    )


def hf_gpt2():
    tok = tokenizers.Tokenizer(
        models.BPE.from_file(str(GPT2_DIR / "encoder.json"), str(GPT2_DIR / "vocab.bpe"))
    )
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def austen():
    raw = AUSTEN.read_bytes()
    text = raw.decode("utf-8")
    ids = tiktoken_gpt2().encode_ordinary(text)
    hf = hf_gpt2()
    hf_ids = hf.encode(text, add_special_tokens=False).ids
    if hf_ids != ids:
        at = next((k for k, (a, b) in enumerate(zip(ids, hf_ids)) if a != b),
                  min(len(ids), len(hf_ids)))
        sys.exit(f"tiktoken and tokenizers disagree at token {at}")
    if hf.decode(ids) != text:
        sys.exit("decoding the ids does not give the corpus back")
    print(f"// {AUSTEN.relative_to(ROOT)}: {len(raw)} bytes; tiktoken {tiktoken.__version__} "
          f"and tokenizers {tokenizers.__version__} agree on every id")
    print(f"count:  {len(ids)}u")
    print("first:  {" + ", ".join(str(i) for i in ids[:12]) + "}")
    print(f"fnv1a:  0x{fnv1a_ids(ids):016x}ull")


def smollm_split(text):
    pieces = []
    for stretch in regex.split(r"(\p{N})", text):
        pieces += regex.findall(GPT2_PATTERN, stretch)
    return pieces


def hf_split(pre, text):
    return [text[begin:end] for _, (begin, end) in pre.pre_tokenize_str(text)]


def cpp_string(s):
    out = []
    for ch in s:
        if ch in "\"\\":
            out.append("\\" + ch)
        elif ch in "\t\n\r":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r"}[ch])
        elif ord(ch) > 0x7F and unicodedata.category(ch)[0] in "ZC":
            out.append(f"\\u{ord(ch):04x}")  # invisible: spaces, separators, controls
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def splits():
    split_fns = {
        "gpt2": lambda t: regex.findall(GPT2_PATTERN, t),
        "llama3": lambda t: regex.findall(LLAMA3_PATTERN, t),
        "qwen2": lambda t: regex.findall(QWEN2_PATTERN, t),
        "smollm": smollm_split,
    }
    hf_pres = {
        "gpt2": pre_tokenizers.ByteLevel(add_prefix_space=False),
        "smollm": pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]),
    }
    print("const std::vector<SplitCase>& split_cases() {")
    print("  static const std::vector<SplitCase> cases = {")
    for name, split in split_fns.items():
        for text in SPLIT_TEXTS:
            pieces = split(text)
            if "".join(pieces) != text:
                sys.exit(f"{name}: the pieces of {text!r} do not tile it")
            if name in hf_pres and hf_split(hf_pres[name], text) != pieces:
                sys.exit(f"{name}: regex and tokenizers split {text!r} differently")
            print(f"      {{PreTokenizer::{name}, {cpp_string(text)}, "
                  f"{{{', '.join(cpp_string(p) for p in pieces)}}}}},")
    print("  };")
    print("  return cases;")
    print("}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--austen", action="store_true", help="only the Austen ids")
    parser.add_argument("--splits", action="store_true", help="only the split table")
    args = parser.parse_args()
    both = not args.austen and not args.splits
    if args.austen or both:
        austen()
    if args.splits or both:
        splits()


if __name__ == "__main__":
    main()
