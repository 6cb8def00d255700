#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets gguf, config_json and gpt2_vocab into
fuzz/corpus/<target>/ (the safetensors seeds are committed files of their own).

Small valid inputs that between them reach every part of each parser:
  gguf: metadata of every value type (arrays of strings and of arrays included), a custom
    alignment, both versions, each dequantizable ggml type and one that is not, llama.cpp
    tensor names with head counts (so load_llama_gguf unpermutes Q/K), and an embedded
    byte-level BPE tokenizer. Written with struct only (no gguf package).
  config_json: a Hugging Face config.json of each model_type fitgrad reads.
  gpt2_vocab: encoder.json, a NUL byte, vocab.bpe (the cut gpt2_vocab_fuzz.cpp makes).
Run from anywhere: python3 fuzz/make_seeds.py
"""

import json
import os
import struct

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

# Metadata value types and ggml tensor types (their ids in the file).
U8, I8, U16, I16, U32, I32, F32V, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
F32, F16, Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q6_K, BF16 = 0, 1, 2, 3, 6, 8, 12, 14, 30
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32V: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


def gguf_string(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == STRING:
        return gguf_string(v)
    if vtype == ARRAY:
        etype, items = v
        return struct.pack("<IQ", etype, len(items)) + b"".join(value(etype, x) for x in items)
    return struct.pack(SCALAR[vtype], v)


def gguf(kvs, tensors, version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, ne fastest first, ggml type, bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, vtype, v in kvs:
        out += gguf_string(key) + struct.pack("<I", vtype) + value(vtype, v)
    offsets, at = [], 0
    for _, _, _, data in tensors:
        offsets.append(at)
        at = (at + len(data) + alignment - 1) // alignment * alignment
    for (name, ne, ttype, _), off in zip(tensors, offsets):
        out += gguf_string(name) + struct.pack("<I", len(ne))
        out += b"".join(struct.pack("<Q", d) for d in ne) + struct.pack("<IQ", ttype, off)
    out += bytes(-len(out) % alignment)
    for _, _, _, data in tensors:  # each at its offset: the previous ones padded
        out += data + bytes(-len(data) % alignment)
    return out


def pattern(n, seed):
    """n deterministic bytes."""
    return bytes((seed * 31 + i * 7 + (i * i) % 13) % 256 for i in range(n))


def f16(x):
    return struct.pack("<e", x)


def f32s(*xs):
    return b"".join(struct.pack("<f", x) for x in xs)


def bf16s(*xs):
    return b"".join(struct.pack("<f", x)[2:] for x in xs)


def q8_0(seed):
    return f16(0.5) + pattern(32, seed)


def q4_0(seed):
    return f16(0.25) + pattern(16, seed)


def q4_1(seed):
    return f16(0.125) + f16(-1.0) + pattern(16, seed)


def q4_k(seed):
    return f16(0.0625) + f16(0.03125) + pattern(12, seed) + pattern(128, seed + 1)


def q6_k(seed):
    return pattern(128, seed) + pattern(64, seed + 1) + pattern(16, seed + 2) + f16(0.01)


def byte_alphabet():
    """GPT-2's byte-to-unicode table: printable bytes stand for themselves."""
    printable = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


# Merges over the byte alphabet ("\u0120" is the space); each result is a token too.
MERGES = ["\u0120 t", "h e", "\u0120t he", "l l", "e ll", "o ,", "1 2", "12 3"]


def bpe_tokens():
    """The 256 byte tokens, the merge results, then <|endoftext|>."""
    alpha = byte_alphabet()
    return [alpha[b] for b in range(256)] + [m.replace(" ", "") for m in MERGES] + [
        "<|endoftext|>"]


def tokenizer_kvs(pre):
    tokens, merges = bpe_tokens(), MERGES
    types = [6] * 256 + [1] * len(merges) + [3]
    eot = len(tokens) - 1
    return [
        ("tokenizer.ggml.model", STRING, "gpt2"),
        ("tokenizer.ggml.pre", STRING, pre),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
        ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
        ("tokenizer.ggml.merges", ARRAY, (STRING, merges)),
        ("tokenizer.ggml.bos_token_id", U32, eot),
        ("tokenizer.ggml.eos_token_id", U32, eot),
    ]


def config_seeds():
    gpt2 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 50257,
            "n_positions": 1024, "n_ctx": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12,
            "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05,
            "initializer_range": 0.02, "resid_pdrop": 0.1, "bos_token_id": 50256,
            "eos_token_id": 50256, "scale_attn_weights": True, "use_cache": True}
    llama = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 49152,
             "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
             "num_attention_heads": 9, "num_key_value_heads": 3,
             "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "rope_theta": 100000,
             "tie_word_embeddings": True, "hidden_act": "silu", "attention_bias": False,
             "mlp_bias": False, "rope_scaling": None, "torch_dtype": "bfloat16"}
    mistral = {"model_type": "mistral", "vocab_size": 32000, "hidden_size": 4096,
               "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
               "num_key_value_heads": 8, "max_position_embeddings": 32768,
               "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
               "hidden_act": "silu", "tie_word_embeddings": False}
    qwen2 = {"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896,
             "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
             "num_key_value_heads": 2, "max_position_embeddings": 32768, "rms_norm_eps": 1e-06,
             "rope_theta": 1000000.0, "use_sliding_window": False, "sliding_window": 32768,
             "max_window_layers": 21, "tie_word_embeddings": True, "hidden_act": "silu"}
    return {f"{c['model_type']}.json": json.dumps(c, indent=2).encode()
            for c in (gpt2, llama, mistral, qwen2)}


def gpt2_vocab_seeds():
    encoder = json.dumps({t: i for i, t in enumerate(bpe_tokens())}, ensure_ascii=False)
    vocab = "#version: 0.2\n" + "\n".join(MERGES) + "\n"
    return {"tiny.bin": encoder.encode() + b"\0" + vocab.encode()}


def gguf_seeds():
    files = {}

    files["metadata_v3.gguf"] = gguf(
        [
            ("general.architecture", STRING, "llama"),
            ("general.alignment", U32, 64),
            ("u8", U8, 200), ("i8", I8, -100), ("u16", U16, 60000), ("i16", I16, -30000),
            ("u32", U32, 4000000000), ("i32", I32, -2000000000), ("f32", F32V, 1.5),
            ("bool", BOOL, True), ("u64", U64, 2**63), ("i64", I64, -2**62), ("f64", F64, 0.1),
            ("strings", ARRAY, (STRING, ["a", "", "\u00e9t\u00e9"])),
            ("floats", ARRAY, (F32V, [0.5, -2.0])),
            ("nested", ARRAY, (ARRAY, [(U8, [1, 2]), (I64, [-1])])),
        ],
        [
            ("a", [3, 2], F32, f32s(1, 2, 3, 4, 5, 6)),
            ("h", [4], F16, f16(1.0) + f16(-2.0) + f16(0.5) + f16(65504.0)),
            ("b", [2, 2], BF16, bf16s(1.0, -3.0, 0.25, 1e30)),
            ("empty", [0, 5], F32, b""),
        ],
        alignment=64,
    )

    files["quantized_v2.gguf"] = gguf(
        [("general.name", STRING, "quantized")],
        [
            ("q8_0", [32, 2], Q8_0, q8_0(1) + q8_0(2)),
            ("q4_0", [64], Q4_0, q4_0(3) + q4_0(4)),
            ("q4_1", [32], Q4_1, q4_1(5)),
            ("q4_k", [256], Q4_K, q4_k(6)),
            ("q6_k", [256], Q6_K, q6_k(7)),
            ("q5_0", [32], Q5_0, f16(1.0) + pattern(20, 8)),
        ],
        version=2,
    )

    # A two-head Llama block (head_dim 2, one KV head) with llama.cpp names.
    files["llama_tiny.gguf"] = gguf(
        [
            ("general.architecture", STRING, "llama"),
            ("llama.attention.head_count", U32, 2),
            ("llama.attention.head_count_kv", U32, 1),
            ("llama.embedding_length", U32, 4),
            ("llama.block_count", U32, 1),
        ] + tokenizer_kvs("smollm"),
        [
            ("token_embd.weight", [4, 3], F32, f32s(*range(12))),
            ("blk.0.attn_norm.weight", [4], F32, f32s(1, 1, 1, 1)),
            ("blk.0.attn_q.weight", [4, 4], F16, b"".join(f16(i / 4) for i in range(16))),
            ("blk.0.attn_k.weight", [4, 2], BF16, bf16s(*range(8))),
            ("blk.0.attn_v.weight", [32, 2], Q8_0, q8_0(9) + q8_0(10)),
            ("output_norm.weight", [4], F32, f32s(1, 2, 3, 4)),
            ("rope_freqs.weight", [2], F32, f32s(1, 1)),
        ],
    )

    files["tokenizer_gpt2.gguf"] = gguf(tokenizer_kvs("gpt2"), [])
    return files


def main():
    for target, files in (("gguf", gguf_seeds()), ("config_json", config_seeds()),
                          ("gpt2_vocab", gpt2_vocab_seeds())):
        os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(CORPUS, target, name), "wb") as f:
                f.write(data)
            print(f"{target}/{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
