#!/usr/bin/env python3
"""Golden data pinning where fitgrad starts a text with the tokenizer's BOS (Note [The bos a
text starts with] in data/hf_tokenizer.cpp) to transformers: the ids that transformers'
tokenizer(text) gives (add_special_tokens left at its default, True) for every tokenizer folder
of tests/golden/hf_tokenizers/, and for four more folders made here from them.

How to run (CI does NOT run this; it only reads the committed files):

    /usr/bin/python3 -m venv /tmp/bosvenv
    /tmp/bosvenv/bin/pip install transformers==5.23.0 tokenizers==0.23.3
    /tmp/bosvenv/bin/python tests/golden/gen_hf_bos_golden.py [--out DIR]

transformers 4.46.3 gives the same ids but for phi3_style: its LlamaTokenizerFast and
GemmaTokenizerFast rebuilt the post-processor from tokenizer_config.json's add_bos_token when
they loaded, so it adds no BOS there; transformers 5 keeps the post-processor of tokenizer.json,
as every other class always did. fitgrad follows transformers 5. (The texts leave out a run of
leading spaces, which transformers 5 tokenizes otherwise than 4.46.3 for llama2_style's legacy
Metaspace: a difference of the tokenization, not of the BOS, pinned by gen_hf_spm_tokenizer_golden.py.)

Run it after gen_hf_tokenizer_golden.py and gen_hf_spm_tokenizer_golden.py, whose folders it
reads. The folders it writes into DIR (default tests/golden/hf_tokenizers/):
  smollm_bos_style/tokenizer.json
      smollm_style's, its post_processor Sequence[ByteLevel(trim_offsets False),
      TemplateProcessing("<|endoftext|> $A")], the shape of Llama 3's own file: a byte-level
      BPE other than Llama 3's whose post-processor adds a BOS. No tokenizer_config.json: the
      folder loads as PreTrainedTokenizerFast(tokenizer_file=...).
  qwen2_bos_style/tokenizer.json, tokenizer_config.json
      qwen2_style's with post_processor TemplateProcessing("<|im_start|> $A") alone, and a
      config naming PreTrainedTokenizerFast, bos_token <|im_start|>, eos_token <|im_end|>.
  llama3_config_nobos_style/tokenizer.json, tokenizer_config.json
      llama3_style's, the config adding "add_bos_token": false: the post-processor's template
      still adds the BOS.
  phi3_style/tokenizer.json, tokenizer_config.json
      mistral_style's (whose template adds <s>) with Phi-3's config: LlamaTokenizer,
      "add_bos_token": false. transformers 5 keeps the template: the BOS is added.
and bos_fixtures.json: {"texts": [...], "<folder>": {"bos": id or null, "ids": [[...], ...]}}
for every folder, tokenizer(text)["input_ids"] of each text through AutoTokenizer (or
PreTrainedTokenizerFast(tokenizer_file=...) for a folder without tokenizer_config.json).
"""

import argparse
import json
import os

from transformers import AutoTokenizer, PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "hf_tokenizers")

TEXTS = [
    "It is a truth universally acknowledged, that a single man",
    "tabs\tand\nlines",
    "中文文本，还有标点。",
    "<s>starts with a special token's text",
    "",
]

FOLDERS = ["llama3_style", "smollm_style", "qwen2_style", "llama2_style", "mistral_style",
           "gemma_style", "smollm_bos_style", "qwen2_bos_style", "llama3_config_nobos_style",
           "phi3_style"]


def template(token, token_id):
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": token, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": token, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": token, "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {token: {"id": token, "ids": [token_id], "tokens": [token]}}}


def token_id(j, text):
    return next(t["id"] for t in j["added_tokens"] if t["content"] == text)


def read(out, name):
    with open(os.path.join(out, name, "tokenizer.json"), encoding="utf-8") as f:
        return json.load(f)


def write(out, name, j, config=None):
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, indent=1)
    if config is not None:
        with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False, indent=1)


def make_folders(out):
    j = read(out, "smollm_style")
    j["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
         "use_regex": True},
        template("<|endoftext|>", token_id(j, "<|endoftext|>"))]}
    write(out, "smollm_bos_style", j)

    j = read(out, "qwen2_style")
    j["post_processor"] = template("<|im_start|>", token_id(j, "<|im_start|>"))
    write(out, "qwen2_bos_style", j, {"tokenizer_class": "PreTrainedTokenizerFast",
                                      "bos_token": "<|im_start|>", "eos_token": "<|im_end|>"})

    with open(os.path.join(out, "llama3_style", "tokenizer_config.json")) as f:
        config = json.load(f)
    config["add_bos_token"] = False
    write(out, "llama3_config_nobos_style", read(out, "llama3_style"), config)

    with open(os.path.join(out, "mistral_style", "tokenizer_config.json")) as f:
        config = json.load(f)
    config["add_bos_token"] = False
    write(out, "phi3_style", read(out, "mistral_style"), config)


def load(out, name):
    folder = os.path.join(out, name)
    config = os.path.join(folder, "tokenizer_config.json")
    if os.path.exists(config):
        # transformers 4.46 reads a role spelled {"content": ...} only with "__type":
        # "AddedToken" (llama3_style spells it without); the role's text is passed instead.
        with open(config) as f:
            roles = {k: v["content"] for k, v in json.load(f).items()
                     if k.endswith("_token") and isinstance(v, dict)}
        return AutoTokenizer.from_pretrained(folder, **roles)
    return PreTrainedTokenizerFast(tokenizer_file=os.path.join(folder, "tokenizer.json"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    make_folders(args.out)
    fixtures = {"texts": TEXTS}
    for name in FOLDERS:
        tok = load(args.out, name)
        fixtures[name] = {"bos": tok.bos_token_id,
                          "ids": [tok(text)["input_ids"] for text in TEXTS]}
        print(name, type(tok).__name__, "bos", tok.bos_token_id,
              [len(i) for i in fixtures[name]["ids"]], fixtures[name]["ids"][0][:3])
    with open(os.path.join(args.out, "bos_fixtures.json"), "w", encoding="utf-8") as f:
        json.dump(fixtures, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
