#!/usr/bin/python3
"""Check a `fitgrad quantize` output (transformers' bitsandbytes 4-bit safetensors layout)
against the NumPy reference quantizer of gen_nf4_golden.py, bit for bit.

How to run (standard library and NumPy only, /usr/bin/python3; CI does NOT run this):

    /usr/bin/python3 tests/golden/check_bnb_4bit.py ORIGINAL.safetensors QUANTIZED.safetensors

Both files are parsed here (8-byte little-endian header length, JSON header, data section;
the tensors must tile the data section exactly). For each `X` in QUANTIZED with an entry
`X.quant_state.bitsandbytes__nf4` (or `__fp4`):
  1. the companions' dtypes and shapes: X U8 [(n+1)//2, 1]; X.absmax U8 [blocks] with double
     quantization, else F32 [blocks]; X.quant_map F32 [16]; with double quantization
     X.nested_absmax F32 [ceil(blocks/256)] and X.nested_quant_map F32 [256]; the quant_state
     JSON has exactly quant_type, blocksize, dtype (the original's torch dtype name), shape
     (the original's), and with double quantization nested_blocksize 256, nested_dtype
     "float32", nested_offset;
  2. quant_map equals the reference's 16 code values and nested_quant_map the signed dynamic
     map, bit for bit;
  3. the ORIGINAL tensor, as float32, quantized with the reference (quant type and blocksize
     from the JSON, double quantization iff the nested entries exist): the packed bytes, the
     absmaxes (or their 8-bit codes, nested_absmax and nested_offset as float32) identical;
  4. the file's own data dequantized with the reference rules: max |deq - original| and the
     bits per weight (packed + absmax + nested_absmax + 4-byte offset; "all" adds the maps
     and the JSON).
Every other tensor of ORIGINAL must be in QUANTIZED with the same dtype, shape and bytes, and
QUANTIZED may hold nothing else. One line per tensor, then a summary; exit status 1 on any
mismatch (each one is described: name, count, first differing index, both values).
"""

import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_nf4_golden import (  # noqa: E402  (after the sys.path line)
    BLOCKSIZES, DQ_BLOCKSIZE, F, bits_per_param, check_thresholds, code_values,
    double_quantize, dynamic_map, nf4_thresholds, pack_nibbles, quantize_4bit)

NP_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8",
             "I32": "<i4", "I16": "<i2", "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2",
             "U8": "u1", "BOOL": "u1"}
TORCH_NAMES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64"}
COMPANIONS = ("absmax", "quant_map", "nested_absmax", "nested_quant_map")


def read_safetensors(path):
    """-> {name: (dtype, shape, raw bytes)}, metadata. Checks the framing."""
    with open(path, "rb") as f:
        buf = f.read()
    (hlen,) = struct.unpack("<Q", buf[:8])
    assert 8 + hlen <= len(buf), f"{path}: header length {hlen} past the end"
    header = json.loads(buf[8:8 + hlen].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = buf[8 + hlen:]
    tensors, end = {}, 0
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        b, t = e["data_offsets"]
        size = np.dtype(NP_DTYPES[e["dtype"]]).itemsize * int(np.prod(e["shape"], dtype=np.int64))
        assert b == end and t - b == size, \
            f"{path}: {name} offsets {b}..{t}, expected {end}..{end + size}"
        tensors[name] = (e["dtype"], list(e["shape"]), data[b:t])
        end = t
    assert end == len(data), f"{path}: data section {len(data)} bytes, tensors cover {end}"
    return tensors, meta


def array(entry):
    dtype, shape, raw = entry
    return np.frombuffer(raw, dtype=NP_DTYPES[dtype]).reshape(shape)


def as_f32(entry):
    a = array(entry)
    if entry[0] == "BF16":
        return (a.astype(np.uint32) << 16).view(F).reshape(-1)
    return a.astype(F).reshape(-1)


def bit_diff(what, got, want):
    """'' when identical bit for bit (same size), else a description of the first difference."""
    got, want = np.asarray(got).reshape(-1), np.asarray(want).reshape(-1)
    if got.size != want.size:
        return f"{what}: {got.size} values, reference {want.size}"
    u = {1: np.uint8, 4: np.uint32, 8: np.uint64}
    gb = got.view(u[got.itemsize]) if got.dtype.kind == "f" else got.astype(np.int64)
    wb = want.view(u[want.itemsize]) if want.dtype.kind == "f" else want.astype(np.int64)
    bad = np.nonzero(gb != wb)[0]
    if bad.size == 0:
        return ""
    i = bad[0]
    return (f"{what}: {bad.size} of {got.size} differ, first at [{i}]: file {got[i]!r}, "
            f"reference {want[i]!r} (indices {bad[:8].tolist()}{'...' if bad.size > 8 else ''})")


def check_weight(x, qt, q, orig, t, dmap):
    """-> (problems, line, (n, data bytes))."""
    bad = []
    odt, oshape, _ = orig[x]
    n = int(np.prod(oshape))
    st = json.loads(bytes(q[f"{x}.quant_state.bitsandbytes__{qt}"][2]))
    dq = f"{x}.nested_absmax" in q or f"{x}.nested_quant_map" in q
    keys = {"quant_type", "blocksize", "dtype", "shape"}
    if dq:
        keys |= {"nested_blocksize", "nested_dtype", "nested_offset"}
    if set(st) != keys:
        bad.append(f"quant_state keys {sorted(st)}, expected {sorted(keys)}")
    want = {"quant_type": qt, "dtype": TORCH_NAMES.get(odt), "shape": oshape,
            "nested_blocksize": DQ_BLOCKSIZE, "nested_dtype": "float32"}
    bad += [f"quant_state {k} {st[k]!r}, expected {v!r}" for k, v in want.items()
            if k in st and st[k] != v]
    bs = st.get("blocksize")
    if bs not in BLOCKSIZES:
        return bad + [f"blocksize {bs!r}"], "", (n, 0)
    blocks = -(-n // bs)
    shapes = {x: ("U8", [(n + 1) // 2, 1]), f"{x}.absmax": ("U8" if dq else "F32", [blocks]),
              f"{x}.quant_map": ("F32", [16])}
    if dq:
        shapes.update({f"{x}.nested_absmax": ("F32", [-(-blocks // DQ_BLOCKSIZE)]),
                       f"{x}.nested_quant_map": ("F32", [256])})
    layout = [f"{name}: {q[name][:2] if name in q else None}, expected {(dt, shape)}"
              for name, (dt, shape) in shapes.items()
              if name not in q or q[name][:2] != (dt, shape)]
    if layout:
        return bad + layout, "", (n, 0)

    a = as_f32(orig[x])
    codes, pad, absmax, _ = quantize_4bit(a, bs, qt, t)
    packed = array(q[x]).reshape(-1)
    checks = [("quant_map", array(q[f"{x}.quant_map"]), code_values(qt, np.arange(16))),
              ("packed", packed, pack_nibbles(codes, pad).astype(np.uint8))]
    qabs = array(q[f"{x}.absmax"])
    if dq:
        rq, absmax2, offset, _ = double_quantize(absmax, dmap)
        file_offset = F(st["nested_offset"])
        checks += [("nested_quant_map", array(q[f"{x}.nested_quant_map"]), dmap),
                   ("absmax codes", qabs, rq.astype(np.uint8)),
                   ("nested_absmax", array(q[f"{x}.nested_absmax"]), absmax2),
                   ("nested_offset", np.array([file_offset]), np.array([offset]))]
        if float(file_offset) != st["nested_offset"]:
            bad.append(f"nested_offset {st['nested_offset']!r} is not a float32")
        nab = array(q[f"{x}.nested_absmax"])
        scale = (dmap[qabs] * nab[np.arange(blocks) // DQ_BLOCKSIZE]) + file_offset
    else:
        checks.append(("absmax", qabs, absmax))
        scale = qabs
    bad += [m for m in (bit_diff(*c) for c in checks) if m]

    fcodes = np.stack([packed >> 4, packed & 15], axis=1).reshape(-1)[:n].astype(np.int64)
    deq = code_values(qt, fcodes) * scale[np.arange(n) // bs]
    assert deq.dtype == F
    err = float(np.max(np.abs(deq - a)))
    nbytes = packed.size + qabs.nbytes + (array(q[f"{x}.nested_absmax"]).nbytes + 4 if dq else 0)
    if nbytes * 8 / n != bits_per_param(n, bs, dq):
        bad.append(f"{nbytes} data bytes, reference formula {bits_per_param(n, bs, dq) * n / 8}")
    allbytes = sum(len(v[2]) for k, v in q.items() if k == x or k.startswith(x + "."))
    line = (f"{qt} bs {bs}{' dq' if dq else ''} {odt}{oshape}: max|deq-orig| {err:.4g} "
            f"(max|orig| {float(np.max(np.abs(a))):.4g}), {nbytes * 8 / n:.4f} bits/weight "
            f"({allbytes * 8 / n:.4f} all)")
    return bad, line, (n, nbytes)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    orig, _ = read_safetensors(sys.argv[1])
    q, qmeta = read_safetensors(sys.argv[2])
    t = nf4_thresholds()
    assert not check_thresholds(t)[0]
    dmap = dynamic_map(True)

    quantized = {}
    for name in q:
        for qt in ("nf4", "fp4"):
            suffix = f".quant_state.bitsandbytes__{qt}"
            if name.endswith(suffix):
                quantized[name[:-len(suffix)]] = qt
    owned = set(quantized) | {f"{x}.quant_state.bitsandbytes__{qt}" for x, qt in quantized.items()}
    owned |= {f"{x}.{c}" for x in quantized for c in COMPANIONS if f"{x}.{c}" in q}

    problems, nq, kept, tot_n, tot_bytes = 0, 0, 0, 0, 0
    for name, entry in orig.items():
        if name in quantized:
            with np.errstate(divide="ignore", invalid="ignore"):
                bad, line, (n, nb) = check_weight(name, quantized[name], q, orig, t, dmap)
            nq, tot_n, tot_bytes = nq + 1, tot_n + n, tot_bytes + nb
        elif name not in q:
            bad, line = ["missing from the quantized file"], ""
        else:
            bad, line = [], f"kept {entry[0]}{entry[1]}"
            if q[name][:2] != entry[:2]:
                bad.append(f"{q[name][:2]}, original {entry[:2]}")
            elif q[name][2] != entry[2]:
                bad.append(bit_diff("bytes", np.frombuffer(q[name][2], np.uint8),
                                    np.frombuffer(entry[2], np.uint8)))
            kept += not bad
        print(f"{'FAIL' if bad else 'ok  '} {name}: {line}")
        for m in bad:
            print(f"       {m}")
        problems += len(bad)
    for name in sorted(set(quantized) - set(orig)):
        print(f"FAIL {name}: quantized but not in the original")
        problems += 1
    for name in sorted(set(q) - set(orig) - owned):
        print(f"FAIL {name}: in the quantized file only")
        problems += 1

    osize, qsize = os.path.getsize(sys.argv[1]), os.path.getsize(sys.argv[2])
    print(f"summary: {nq} quantized weights ({tot_n} values, "
          f"{tot_bytes * 8 / max(tot_n, 1):.4f} bits/weight), {kept} tensors kept unchanged; "
          f"file {osize} -> {qsize} bytes ({qsize / osize:.3f}); metadata {qmeta}; "
          f"{problems} mismatch{'es' if problems != 1 else ''}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
