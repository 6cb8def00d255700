"""Golden data for fitgrad's instruction and chat datasets (data/sft_records.h, data/sft_encode.h).

Reads the fixture datasets in tests/golden/sft/records/ (every format: text, alpaca, sharegpt,
messages, prompt_completion plain and conversational), turns each record into what it means
(a text, a conversation, or a prompt and a completion) by the rules of data/sft_records.h,
written again here, and encodes it for each (tokenizer, chat template) pair below with Python's
jinja2 in the environment transformers' apply_chat_template compiles
(transformers.utils.chat_template_utils._compile_jinja_template) and the `tokenizers` library;
the ids of every whole conversation are also checked against transformers' own
apply_chat_template(tokenize=True).
The loss masks follow the definition of data/sft_encode.h, computed here on their own:

  conversation      ids = tokenize(render(messages)); assistant message k trains the tokens
                    between tokenize(render(messages[:k], add_generation_prompt=True)) and
                    tokenize(render(messages[:k + 1])), each rendering a character prefix of
                    the full one and its tokens a token prefix of the full list;
  prompt_completion as TRL's SFTTrainer: the prompt untrained, the completion trained (plain
                    text: tokenizer(prompt) and tokenizer(prompt + completion + eos); messages:
                    the prompt rendered with add_generation_prompt, whatever its last role);
  text              tokenizer(text + eos), every token trained.

Each case is a (pair, file, record) with its ids and, per train_on mode (assistant, all,
last), the trained flags as a string of 0 and 1, or the failure: "raised" (the template's
raise_exception, with its message), "prefix" (a prefix rendering or its tokens are not a
prefix of the full ones), or "render" (any other template error).

Run with transformers' virtual environment (transformers 4.46.3, jinja2, tokenizers):
    /work/venv-hf/bin/python tests/golden/gen_sft_golden.py
It writes tests/golden/sft/expected.json.
"""

import json
import os

import jinja2
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast
from transformers.utils.chat_template_utils import _compile_jinja_template

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDS = os.path.join(HERE, "sft", "records")
TOKENIZERS = os.path.join(HERE, "hf_tokenizers")
TEMPLATES = os.path.join(HERE, "chat_templates")

# (tokenizer folder, template file). qwen2_style, mistral_style and gemma_style hold every
# marker of their template as an added token; llama3_style lacks <|start_header_id|> and
# <|end_header_id|>, and smollm_style <|im_start|> and <|im_end|>, whose text then tokenizes
# as ordinary text (still a test: the deltas must stay token prefixes).
PAIRS = [
    ("qwen2_style", "qwen25.jinja"),
    ("qwen2_style", "smollm2.jinja"),
    ("qwen2_style", "qwen3.jinja"),
    ("smollm_style", "smollm2.jinja"),
    ("llama3_style", "llama31.jinja"),
    ("mistral_style", "mistral_v1.jinja"),
    ("gemma_style", "gemma2.jinja"),
]

FILES = ["text.jsonl", "alpaca.json", "sharegpt.jsonl", "messages.jsonl",
         "prompt_completion.jsonl", "prompt_completion_chat.jsonl"]

SHAREGPT_ROLES = {
    "system": "system",
    "human": "user", "user": "user", "input": "user",
    "gpt": "assistant", "assistant": "assistant", "model": "assistant", "output": "assistant",
    "tool": "tool", "observation": "tool", "function_response": "tool",
}


class PrefixError(Exception):
    pass


def read_records(name):
    path = os.path.join(RECORDS, name)
    with open(path, encoding="utf-8") as f:
        if name.endswith(".json"):
            return json.load(f)
        return [json.loads(line) for line in f if line.strip()]


def detect(record):
    if "messages" in record:
        return "messages"
    if "conversations" in record:
        return "sharegpt"
    if "prompt" in record and "completion" in record:
        return "prompt_completion"
    if "instruction" in record:
        return "alpaca"
    return "text"


def meaning(record):
    """(kind, payload, tools): kind is text, conversation, plain_pc or chat_pc."""
    fmt = detect(record)
    if fmt == "text":
        return "text", record["text"], None
    if fmt == "alpaca":
        messages = []
        if record.get("system"):
            messages.append({"role": "system", "content": record["system"]})
        for old_prompt, old_response in record.get("history", []):
            messages.append({"role": "user", "content": old_prompt})
            messages.append({"role": "assistant", "content": old_response})
        query = [part for part in (record["instruction"], record.get("input", "")) if part]
        messages.append({"role": "user", "content": "\n".join(query)})
        messages.append({"role": "assistant", "content": record["output"]})
        return "conversation", messages, None
    if fmt == "sharegpt":
        messages = []
        if record.get("system"):
            messages.append({"role": "system", "content": record["system"]})
        for turn in record["conversations"]:
            messages.append({"role": SHAREGPT_ROLES[turn["from"]], "content": turn["value"]})
        return "conversation", messages, record.get("tools")
    if fmt == "messages":
        return "conversation", record["messages"], record.get("tools")
    if isinstance(record["prompt"], str):
        return "plain_pc", (record["prompt"], record["completion"]), None
    return "chat_pc", (record["prompt"], record["completion"]), record.get("tools")


class Pair:
    def __init__(self, tokenizer_dir, template_file):
        folder = os.path.join(TOKENIZERS, tokenizer_dir)
        self.tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        config_path = os.path.join(folder, "tokenizer_config.json")
        config = json.load(open(config_path)) if os.path.exists(config_path) else {}
        # transformers passes the special tokens map (the roles that are set) to templates.
        self.special = {}
        for role in ("bos_token", "eos_token"):
            value = config.get(role)
            if isinstance(value, dict):
                value = value["content"]
            if value is not None:
                self.special[role] = value
        self.eos = self.special.get("eos_token")
        with open(os.path.join(TEMPLATES, template_file), encoding="utf-8") as f:
            self.source = f.read()
        self.template = _compile_jinja_template(self.source)
        # transformers itself, to confirm that the ids below are apply_chat_template's.
        self.hf = PreTrainedTokenizerFast(tokenizer_object=self.tok, **self.special)

    def encode(self, text, special=False):
        return self.tok.encode(text, add_special_tokens=special).ids

    def render(self, messages, tools, add_generation_prompt):
        return self.template.render(messages=messages, tools=tools, documents=None,
                                    add_generation_prompt=add_generation_prompt,
                                    **self.special)


def prefix_ids(pair, full_text, full_ids, text):
    if not full_text.startswith(text):
        raise PrefixError("text")
    ids = pair.encode(text)
    if full_ids[: len(ids)] != ids:
        raise PrefixError("tokens")
    return len(ids)


def conversation_masks(pair, messages, tools):
    full_text = pair.render(messages, tools, False)
    ids = pair.encode(full_text)
    assert ids == pair.hf.apply_chat_template(messages, tools=tools, chat_template=pair.source,
                                              tokenize=True)
    assistants = [k for k, m in enumerate(messages) if m["role"] == "assistant"]
    masks = {"all": [1] * len(ids)}
    for mode, chosen in (("assistant", assistants), ("last", assistants[-1:])):
        try:
            mask = [0] * len(ids)
            for k in chosen:
                begin = prefix_ids(pair, full_text, ids, pair.render(messages[:k], tools, True))
                end = prefix_ids(pair, full_text, ids, pair.render(messages[: k + 1], tools, False))
                for i in range(begin, end):
                    mask[i] = 1
            masks[mode] = mask
        except PrefixError:
            masks[mode] = {"error": "prefix"}
    return ids, masks


def chat_pc_masks(pair, prompt, completion, tools):
    full_text = pair.render(prompt + completion, tools, False)
    ids = pair.encode(full_text)
    masks = {"all": [1] * len(ids)}
    try:
        begin = prefix_ids(pair, full_text, ids, pair.render(prompt, tools, True))
        mask = [0] * begin + [1] * (len(ids) - begin)
    except PrefixError:
        mask = {"error": "prefix"}
    masks["assistant"] = mask
    masks["last"] = mask
    return ids, masks


def plain_pc_masks(pair, prompt, completion):
    text = prompt + completion
    if pair.eos is not None and not text.endswith(pair.eos):
        text += pair.eos
    ids = pair.encode(text, special=True)
    prompt_ids = pair.encode(prompt, special=True)
    masks = {"all": [1] * len(ids)}
    if ids[: len(prompt_ids)] == prompt_ids:
        mask = [0] * len(prompt_ids) + [1] * (len(ids) - len(prompt_ids))
    else:
        mask = {"error": "prefix"}
    masks["assistant"] = mask
    masks["last"] = mask
    return ids, masks


def text_masks(pair, text):
    if pair.eos is not None and not text.endswith(pair.eos):
        text += pair.eos
    ids = pair.encode(text, special=True)
    return ids, {mode: [1] * len(ids) for mode in ("assistant", "all", "last")}


def case(pair, record):
    kind, payload, tools = meaning(record)
    try:
        if kind == "text":
            ids, masks = text_masks(pair, payload)
        elif kind == "plain_pc":
            ids, masks = plain_pc_masks(pair, *payload)
        elif kind == "chat_pc":
            ids, masks = chat_pc_masks(pair, payload[0], payload[1], tools)
        else:
            ids, masks = conversation_masks(pair, payload, tools)
    except jinja2.exceptions.TemplateError as e:
        if type(e).__name__ == "TemplateError" or "raise_exception" in repr(e):
            return {"error": "raised", "message": str(e)}
        return {"error": "render", "message": f"{type(e).__name__}: {e}"}
    out = {"ids": ids}
    for mode, mask in masks.items():
        out[mode] = mask if isinstance(mask, dict) else "".join(str(b) for b in mask)
    return out


def main():
    cases = []
    for tokenizer_dir, template_file in PAIRS:
        pair = Pair(tokenizer_dir, template_file)
        for name in FILES:
            for index, record in enumerate(read_records(name)):
                c = {"tokenizer": tokenizer_dir, "template": template_file, "file": name,
                     "index": index, "format": detect(record)}
                c.update(case(pair, record))
                cases.append(c)
    out = os.path.join(HERE, "sft", "expected.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"cases": cases}, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    errors = [c for c in cases if "error" in c]
    prefix = [c for c in cases if any(isinstance(c.get(m), dict) for m in ("assistant", "last"))]
    print(f"{len(cases)} cases, {len(errors)} template errors, {len(prefix)} with a prefix "
          f"failure, {os.path.getsize(out)} bytes -> {out}")
    for c in errors + prefix:
        print(" ", c["tokenizer"], c["template"], c["file"], c["index"],
              c.get("error") or "prefix", c.get("message", ""))


if __name__ == "__main__":
    main()
