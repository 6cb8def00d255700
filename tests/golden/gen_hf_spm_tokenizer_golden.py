#!/usr/bin/env python3
"""Golden data pinning fitgrad's tokenizer.json reader (data/hf_tokenizer.h) on SentencePiece-
style BPE tokenizers with byte fallback, as the Llama 2, Mistral and Gemma families ship them,
to Hugging Face `tokenizers`, and a GGUF vocabulary of the same model to the `sentencepiece`
library.

How to run (CI does NOT run this; it only reads the committed tests/golden/hf_tokenizers/):

    /usr/bin/python3 -m venv /tmp/spmvenv
    /tmp/spmvenv/bin/pip install transformers==4.46.3 tokenizers==0.20.3 sentencepiece==0.2.3 \\
        protobuf gguf==0.19.0 torch
    /tmp/spmvenv/bin/python tests/golden/gen_hf_spm_tokenizer_golden.py [--out DIR]

(Generated with protobuf 7.36; the output is the same from run to run.)

Two SentencePiece BPE models are trained (in a temporary folder; the .model files are not
kept) on the first 4,000 lines of data/assets/austen.txt, 200 dated lines (Austen has few
digits) and 48 synthetic Russian sentences, each 3 times, with vocab_size 1000,
byte_fallback, split_digits, allow_whitespace_only_pieces, remove_extra_whitespaces False,
normalization "identity", character_coverage 1.0, num_threads 1 and unshuffled input:
  * "llama": unk/bos/eos = 0/1/2 = <unk>, <s>, </s> (as Llama 2 and Mistral), add_dummy_prefix
    True; ids 3..258 are the byte pieces <0x00>..<0xFF>.
  * "gemma": pad/eos/bos/unk = 0/1/2/3 = <pad>, <eos>, <bos>, <unk> (as Gemma),
    add_dummy_prefix False; the byte pieces are ids 4..259.
Chinese, Arabic, emoji and combining marks do not occur in the corpus, so they are not in
either vocab and go through byte fallback, as do the few Latin, Cyrillic and ASCII characters
the corpus lacks (among them "Р", "ï", "é", "<", "+", "[", "\\n"; in gemma_style "\\t" is a
vocab token); the other Latin and Cyrillic letters and the digits are pieces.

Writes DIR (default tests/golden/hf_tokenizers/):
  llama2_style/tokenizer.json, llama2_style/tokenizer_config.json
      transformers 4.46.3's LlamaTokenizerFast(vocab_file=llama model, legacy=True,
      add_prefix_space=True, from_slow=True) (LlamaConverter), then saved with
      save_pretrained (the json files are re-dumped with indent=1; tokenizer.model and
      special_tokens_map.json are removed, and "add_prefix_space" is dropped from
      tokenizer_config.json so that transformers loads the folder without tokenizer.model).
      add_prefix_space=True is needed: left None, 4.46.3 writes neither the Prepend nor the
      Strip below. The pipeline is then Llama 2's:
      normalizer Sequence[Prepend("▁"), Replace(" ", "▁")], no pre_tokenizer, model BPE
      (byte_fallback True, fuse_unk True, unk_token "<unk>", ignore_merges False; merges
      generated from the piece scores), decoder Sequence[Replace("▁", " "), ByteFallback,
      Fuse, Strip(" ", 1, 0)], post_processor TemplateProcessing "<s> $A" (add_bos_token).
      Added tokens after the vocab (ids 1000..1005), in this order:
        <|im_end|>  special, lstrip/rstrip/single_word False, normalized False
        [INST]      special, normalized False
        <mask>      special, lstrip True, normalized False
        <rs>        not special, rstrip True, normalized False
        xyzzy       not special, single_word True, normalized False
        plugh       not special, normalized True (so it is matched on the normalized text,
                    and its content is normalized too: it only matches "▁plugh")
  mistral_style/tokenizer.json, mistral_style/tokenizer_config.json
      the same model with legacy=False (and add_prefix_space=True, as above): no normalizer,
      pre_tokenizer Metaspace("▁", prepend_scheme "first", split False), the same model
      flags, the same decoder (Strip included) and post_processor; added special tokens
      [INST], [/INST] (ids 1000, 1001), normalized False. tokenizer_config.json has
      "legacy": false.
  gemma_style/tokenizer.json, gemma_style/tokenizer_config.json
      transformers 4.46.3's GemmaTokenizerFast(vocab_file=gemma model, from_slow=True)
      (GemmaConvert; the converter works on this model): normalizer Replace(" ", "▁"),
      pre_tokenizer Split(" ", MergedWithPrevious) (what GemmaConvert writes; it never
      splits, since the normalizer leaves no " "), model BPE (byte_fallback True, fuse_unk
      True, unk_token "<unk>", ignore_merges False; the vocab has "\\t" instead of
      "<0x09>", as GemmaConvert writes), decoder Sequence[Replace("▁", " "), ByteFallback,
      Fuse] (no Strip: no prefix space), post_processor TemplateProcessing "<bos> $A";
      added special tokens <start_of_turn>, <end_of_turn> (ids 1000, 1001).
  llama2_style.gguf
      a vocabulary-only GGUF (general.architecture "llama", no tensors) of the llama model as
      llama.cpp's convert_hf_to_gguf.py `_create_vocab_sentencepiece` writes it:
      tokenizer.ggml.model "llama", tokens (the pieces, then llama2_style's six added
      tokens), scores (sentencepiece's; -1000 for the added tokens), token_type (1 normal,
      2 unknown, 3 control, 6 byte from sentencepiece; the added tokens 3 control when
      special, else 4 user-defined), bos/eos/unk ids 1/2/0, add_bos_token True,
      add_eos_token False, add_space_prefix True. (Unlike convert_hf_to_gguf.py, ids 0-2 keep
      sentencepiece's types and scores rather than being forced to control / -1000.)
  spm_fixtures.json
      {"texts": [...], "llama2_style": [{"ids": [...], "decoded": "..."}], "mistral_style":
      [...], "gemma_style": [...], "with_bos": {style: [{"ids", "decoded"} for the first 2
      texts]}, "sentencepiece": [{"text_index": i, "ids": [...]}]}: for each style,
      tokenizers.Tokenizer.from_file(tokenizer.json).encode(text, add_special_tokens=False)
      and decode(ids, skip_special_tokens=False) for every text; "with_bos" the same with
      add_special_tokens=True; "sentencepiece" the ids SentencePieceProcessor(llama
      model).encode(text) gives (dummy prefix on) for every text that contains none of the
      added tokens' contents. The texts: English prose, contractions, digit runs, white space
      (leading spaces, tabs, CRLF), Chinese, Russian, Arabic, emoji (a ZWJ sequence),
      decomposed accents, a trailing space, "", each added token at the start and between
      spaces (lstrip/rstrip), single_word cases, Mistral's [INST] ... [/INST], Gemma's turn
      markers, a leading space, spaces only, a literal "▁", and unknown characters next to
      known ones.
"""

import argparse
import json
import os
import shutil
import tempfile

import sentencepiece as spm
from tokenizers import AddedToken, Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(HERE, "hf_tokenizers")
VOCAB = 1000

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
    "ends with space ",
    "decomposed: cafe\u0301 re\u0301sume\u0301, A\u030A, \u212B, e\u0302\u0323, \u1100\u1161",
    "",
    " starts with a space",
    "   ",
    " ",
    "a literal ▁ metaspace ▁▁ and ▁word",
    "Emma Ωmega naïve café 日本 Москва ok",
    # Added and special tokens.
    "<|im_end|>hello",
    "a <|im_end|> b",
    "hello   <mask>  world",
    "<mask>start and end<mask>",
    "x <rs>   y <rs>",
    "xyzzy xyzzyplugh plughxyzzy",
    "plugh xyzzy, (xyzzy) plugh.plugh",
    "[INST] What is 2+2? [/INST]",
    "[INST]hi[/INST] Four.</s>",
    "<s>raw bos</s> and <unk>",
    "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
]

# Contents of every added or special token of the three styles (texts containing one of these
# are left out of the "sentencepiece" fixtures).
TOKEN_TEXTS = ["<|im_end|>", "[INST]", "[/INST]", "<mask>", "<rs>", "xyzzy", "plugh", "<s>",
               "</s>", "<unk>", "<start_of_turn>", "<end_of_turn>"]

RU_SUBJECTS = ["Мама", "Старый учитель", "Моя сестра", "Этот человек", "Молодая девушка",
               "Наш сосед", "Маленький мальчик", "Её отец"]
RU_VERBS = ["читает", "любит", "видит", "пишет", "знает", "ищет"]
RU_OBJECTS = ["интересную книгу", "длинное письмо", "красивый дом", "новую историю",
              "старую песню", "русский текст", "свою собаку", "большой город"]


def russian():
    out = []
    for i in range(48):
        s = RU_SUBJECTS[i % len(RU_SUBJECTS)]
        v = RU_VERBS[(i // 2) % len(RU_VERBS)]
        o = RU_OBJECTS[(i * 3) % len(RU_OBJECTS)]
        end = ["." , "!", "?", "..."][i % 4]
        out.append(f"{s} {v} {o}, и это хорошо{end} Сегодня {i + 1} день, а не {i * 7 % 31}.")
    return out


def corpus():
    with open(os.path.join(ROOT, "data", "assets", "austen.txt"), encoding="utf-8") as f:
        lines = f.read().splitlines()[:4000]
    dates = [f"In {year} there were {year * 7 % 1000} pounds and {year % 97} guineas."
             for year in range(1700, 1900)]
    return (lines + dates + russian()) * 3


def train_spm(folder, name, gemma):
    path = os.path.join(folder, "corpus.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(line for line in corpus() if line.strip()) + "\n")
    ids = dict(pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>",
               bos_piece="<bos>", unk_piece="<unk>") if gemma else dict(
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, unk_piece="<unk>", bos_piece="<s>",
        eos_piece="</s>")
    spm.SentencePieceTrainer.train(
        input=path, model_prefix=os.path.join(folder, name), model_type="bpe",
        vocab_size=VOCAB, byte_fallback=True, character_coverage=1.0, split_digits=True,
        allow_whitespace_only_pieces=True, remove_extra_whitespaces=False,
        normalization_rule_name="identity", add_dummy_prefix=not gemma, num_threads=1,
        input_sentence_size=0, shuffle_input_sentence=False, max_sentence_length=100000,
        minloglevel=2, **ids)
    return os.path.join(folder, name + ".model")


def save(tok, folder):
    """save_pretrained, keeping only tokenizer.json and tokenizer_config.json (indent=1)."""
    tmp = tempfile.mkdtemp()
    try:
        tok.save_pretrained(tmp)
        os.makedirs(folder, exist_ok=True)
        for name in ["tokenizer.json", "tokenizer_config.json"]:
            with open(os.path.join(tmp, name), encoding="utf-8") as f:
                j = json.load(f)
            # add_prefix_space (set to get Llama 2's pipeline, see llama2_style) would make
            # transformers re-convert from the deleted tokenizer.model when it loads the folder.
            j.pop("add_prefix_space", None)
            with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                json.dump(j, f, ensure_ascii=False, indent=1)
    finally:
        shutil.rmtree(tmp)


def llama2_style(model):
    from transformers import LlamaTokenizerFast
    tok = LlamaTokenizerFast(vocab_file=model, legacy=True, add_prefix_space=True,
                             from_slow=True)
    tok.add_tokens([
        AddedToken("<|im_end|>", special=True, normalized=False),
        AddedToken("[INST]", special=True, normalized=False),
        AddedToken("<mask>", lstrip=True, special=True, normalized=False),
        AddedToken("<rs>", rstrip=True, special=False, normalized=False),
        AddedToken("xyzzy", single_word=True, special=False, normalized=False),
        AddedToken("plugh", special=False, normalized=True),
    ])
    return tok


def mistral_style(model):
    from transformers import LlamaTokenizerFast
    tok = LlamaTokenizerFast(vocab_file=model, legacy=False, add_prefix_space=True,
                             from_slow=True)
    tok.add_tokens([AddedToken("[INST]", special=True, normalized=False),
                    AddedToken("[/INST]", special=True, normalized=False)])
    return tok


def gemma_style(model):
    from transformers import GemmaTokenizerFast
    tok = GemmaTokenizerFast(vocab_file=model, from_slow=True)
    tok.add_tokens([AddedToken("<start_of_turn>", special=True, normalized=False),
                    AddedToken("<end_of_turn>", special=True, normalized=False)])
    return tok


def golden(tok, texts, add_special_tokens=False):
    out = []
    for text in texts:
        ids = tok.encode(text, add_special_tokens=add_special_tokens).ids
        out.append({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
    return out


def write_gguf(path, model, config):
    import gguf
    sp = spm.SentencePieceProcessor(model_file=model)
    tokens, scores, types = [], [], []
    T = gguf.TokenType
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i).encode("utf-8"))
        scores.append(sp.get_score(i))
        types.append(T.UNKNOWN if sp.is_unknown(i) else T.CONTROL if sp.is_control(i)
                     else T.UNUSED if sp.is_unused(i) else T.BYTE if sp.is_byte(i)
                     else T.NORMAL)
    added = {int(k): v for k, v in config["added_tokens_decoder"].items()}
    for i in sorted(k for k in added if k >= len(tokens)):
        assert i == len(tokens)
        tokens.append(added[i]["content"].encode("utf-8"))
        scores.append(-1000.0)
        types.append(T.CONTROL if added[i]["special"] else T.USER_DEFINED)
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tokens, scores, types


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp()
    try:
        models = {"llama": train_spm(tmp, "llama", gemma=False),
                  "gemma": train_spm(tmp, "gemma", gemma=True)}
        fixtures = {"texts": TEXTS}
        with_bos = {}
        for name, make, model in [("llama2_style", llama2_style, "llama"),
                                  ("mistral_style", mistral_style, "llama"),
                                  ("gemma_style", gemma_style, "gemma")]:
            folder = os.path.join(args.out, name)
            save(make(models[model]), folder)
            tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
            fixtures[name] = golden(tok, TEXTS)
            with_bos[name] = golden(tok, TEXTS[:2], add_special_tokens=True)
            j = json.load(open(os.path.join(folder, "tokenizer.json"), encoding="utf-8"))
            print(name, len(j["model"]["vocab"]), "tokens,", len(j["model"]["merges"]),
                  "merges,", len(j["added_tokens"]), "added tokens")
        fixtures["with_bos"] = with_bos
        sp = spm.SentencePieceProcessor(model_file=models["llama"])
        fixtures["sentencepiece"] = [
            {"text_index": i, "ids": sp.encode(t)} for i, t in enumerate(TEXTS)
            if not any(s in t for s in TOKEN_TEXTS)]
        for e in fixtures["sentencepiece"]:
            if e["ids"] != fixtures["llama2_style"][e["text_index"]]["ids"]:
                print("sentencepiece and llama2_style differ on", repr(TEXTS[e["text_index"]]))
        with open(os.path.join(args.out, "llama2_style", "tokenizer_config.json"),
                  encoding="utf-8") as f:
            config = json.load(f)
        write_gguf(os.path.join(args.out, "llama2_style.gguf"), models["llama"], config)
        with open(os.path.join(args.out, "spm_fixtures.json"), "w", encoding="utf-8") as f:
            json.dump(fixtures, f, ensure_ascii=False, indent=1)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
