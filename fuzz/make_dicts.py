#!/usr/bin/env python3
"""Writes the libFuzzer dictionaries of the fuzz targets jinja, sft_records and tokenizer_json
(fuzz/<target>.dict) from the real inputs the tests hold, so the fuzzer speaks their language:
  jinja: the tags, names, string literals and operators inside {% %} and {{ }} of the chat
    templates in tests/golden/chat_templates (as transformers ships them), and the delimiters.
  sft_records: the keys and short string values of the records in tests/golden/sft/records.
  tokenizer_json: the keys and "type" values of the tokenizer.json files in
    tests/golden/hf_tokenizers.
Run from anywhere: python3 fuzz/make_dicts.py
"""

import glob
import json
import os
import re

FUZZ = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(os.path.dirname(FUZZ), "tests", "golden")


def quote(s):
    out = ""
    for b in s.encode("utf-8"):
        c = chr(b)
        out += c if 32 <= b < 127 and c not in '"\\' else "\\x%02X" % b
    return '"' + out + '"'


def write(name, header, words):
    path = os.path.join(FUZZ, name + ".dict")
    with open(path, "w") as f:
        f.write(header)
        for w in sorted(words):
            f.write(quote(w) + "\n")
    print(f"{name}.dict: {len(words)} entries")


def jinja_words():
    words = {"{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", "{%+", "+%}"}
    for path in glob.glob(os.path.join(GOLDEN, "chat_templates", "*.jinja")):
        text = open(path, encoding="utf-8").read()
        for code in re.findall(r"\{[{%](.*?)[}%]\}", text, re.S):
            words.update(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", code))
            for literal in re.findall(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", code):
                if len(literal) <= 26:
                    words.add(literal[1:-1])
            words.update(re.findall(r"\*\*|//|==|!=|<=|>=|[-+*/%~|.,:()\[\]<>=]", code))
    return {w for w in words if w}


def json_words(value, keys_only_types=False):
    words = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if len(v) <= 64:  # a vocabulary's tokens are not keys of the format
                    words.add('"%s"' % k)
                if isinstance(x, str) and (not keys_only_types or k == "type") and len(x) <= 24:
                    words.add('"%s"' % x)
                stack.append(x)
        elif isinstance(v, list):
            stack.extend(v[:64])
    return words


def sft_words():
    words = {"[", "]", "{", "}", ":", ",", "null", "true", "false", "\\n"}
    for path in glob.glob(os.path.join(GOLDEN, "sft", "records", "*")):
        text = open(path, encoding="utf-8").read()
        docs = [json.loads(text)] if path.endswith(".json") else [
            json.loads(line) for line in text.splitlines() if line.strip()]
        for d in docs:
            words |= json_words(d)
    return words


def tokenizer_words():
    words = {"[", "]", "{", "}", ":", ",", "null", "true", "false"}
    for path in glob.glob(os.path.join(GOLDEN, "hf_tokenizers", "*", "tokenizer.json")):
        words |= json_words(json.load(open(path, encoding="utf-8")), keys_only_types=True)
    return words


def main():
    write("jinja", "# libFuzzer dictionary for chat templates, made by fuzz/make_dicts.py from\n"
          "# tests/golden/chat_templates: their tags, names, literals and operators.\n",
          jinja_words())
    write("sft_records", "# libFuzzer dictionary for instruction-data records, made by\n"
          "# fuzz/make_dicts.py from the keys and values of tests/golden/sft/records.\n",
          sft_words())
    write("tokenizer_json", "# libFuzzer dictionary for tokenizer.json, made by fuzz/make_dicts.py\n"
          "# from the keys and component types of tests/golden/hf_tokenizers.\n",
          tokenizer_words())


if __name__ == "__main__":
    main()
