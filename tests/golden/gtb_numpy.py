"""The .gtb writer for the NumPy-only generators (the format is tests/golden/golden_file.h;
gen_golden.py's write_case is the torch-tensor twin). Standard library and NumPy only."""

import json
import struct

import numpy as np


def pack_bytes(codes):
    """Byte values (numel,) packed eight to an i64 (the .gtb format has no u8): byte j is byte
    j % 8 (little-endian) of element j // 8, the last element padded with zero bytes."""
    assert codes.min() >= 0 and codes.max() <= 255
    padded = np.zeros(-(-codes.size // 8) * 8, dtype=np.uint8)
    padded[:codes.size] = codes
    return padded.view("<i8")


def write_gtb(path, tensors, meta):
    """name -> numpy array (float -> f32, integer -> i64), as golden_file.h reads it."""
    entries, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        a = np.asarray(a)
        kind = "f32" if np.issubdtype(a.dtype, np.floating) else "i64"
        data = np.ascontiguousarray(a, dtype="<f4" if kind == "f32" else "<i8").tobytes()
        entries[name] = {"dtype": kind, "shape": list(a.shape), "offset": offset,
                         "nbytes": len(data)}
        blobs.append(data + b"\0" * ((-len(data)) % 8))
        offset += len(blobs[-1])
    header = json.dumps({"format": "fitgrad-golden", "version": 1, "tensors": entries,
                         "meta": meta}, sort_keys=True, separators=(",", ":")).encode()
    header += b" " * ((-len(header)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + b"".join(blobs))
