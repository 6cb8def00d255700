#!/usr/bin/env python3
"""An independent safetensors reader that checks files written by fitgrad.

It shares no code with io/safetensors.cpp: the layout is parsed here with Python's
json and struct (zlib only computes CRC-32 checksums, mmap only avoids reading 500 MB
into memory). For every NAME.safetensors in DIR that has a NAME.expected next to it
(written by the gtest SafetensorsGpt2.WriteForIndependentReader from the tensors in
memory), it checks the format rules (8-byte little-endian length, header starting with
'{' and space-padded to a multiple of 8, offsets covering the data section exactly once,
byte sizes matching shape and dtype) and then compares each tensor's name, dtype, shape,
CRC-32 of its bytes and sampled element values with the expected ones.

Usage: read_safetensors.py DIR     (exit status 0 when every file matches)
"""
import json
import mmap
import os
import struct
import sys
import time
import zlib

# safetensors dtype -> (struct format, element size, fitgrad dtype name)
DTYPES = {
    "F32": ("<f", 4, "f32"),
    "F16": ("<e", 2, "f16"),
    "BF16": (None, 2, "bf16"),  # decoded by hand: the top 16 bits of an f32
    "I32": ("<i", 4, "i32"),
    "I64": ("<q", 8, "i64"),
    "U8": ("<B", 1, "u8"),
    "I8": ("<b", 1, "i8"),
}


class Mismatch(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Mismatch(message)


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    check(len(keys) == len(set(keys)), "duplicate keys in the header: %s" % keys)
    return dict(pairs)


def parse(buf):
    """Returns (metadata, entries in header order, data start) after checking the layout."""
    check(len(buf) >= 8, "file shorter than 8 bytes")
    (n,) = struct.unpack_from("<Q", buf, 0)
    check(8 + n <= len(buf), "header length %d past the end of the file" % n)
    raw = bytes(buf[8 : 8 + n])
    check(raw[:1] == b"{", "header does not start with '{'")
    check((8 + n) % 8 == 0, "data section starts at %d, not a multiple of 8" % (8 + n))
    text = raw.decode("utf-8")
    check(text.rstrip(" ").endswith("}"), "the header is padded with more than spaces")
    header = json.loads(text, object_pairs_hook=no_duplicates)
    metadata = header.pop("__metadata__", {})
    data_start = 8 + n
    data_size = len(buf) - data_start
    entries = []
    for name, e in header.items():
        dtype, shape, (begin, end) = e["dtype"], e["shape"], e["data_offsets"]
        check(dtype in DTYPES, "%s: dtype %s" % (name, dtype))
        numel = 1
        for d in shape:
            numel *= d
        check(end - begin == numel * DTYPES[dtype][1], "%s: size mismatch" % name)
        entries.append((name, dtype, shape, begin, end))
    covered = 0
    for name, _, _, begin, end in sorted(entries, key=lambda e: (e[3], e[4])):
        check(begin == covered, "%s starts at %d, not %d" % (name, begin, covered))
        covered = end
    check(covered == data_size, "data section of %d bytes, covered to %d" % (data_size, covered))
    return metadata, entries, data_start


def element(buf, pos, dtype):
    fmt = DTYPES[dtype][0]
    if fmt is None:
        (bits,) = struct.unpack_from("<H", buf, pos)
        return struct.unpack("<f", struct.pack("<I", bits << 16))[0]
    return struct.unpack_from(fmt, buf, pos)[0]


def compare(path, expected_path):
    with open(path, "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(buf)
    metadata, entries, data_start = parse(view)
    lines = [l.split() for l in open(expected_path, encoding="utf-8").read().splitlines()]
    want_meta = {l[1]: l[2] for l in lines if l[0] == "__metadata__"}
    rows = [l for l in lines if l[0] != "__metadata__"]
    check(metadata == want_meta, "metadata %r, expected %r" % (metadata, want_meta))
    check(len(rows) == len(entries), "%d tensors, expected %d" % (len(entries), len(rows)))
    elements = 0
    for row, (name, dtype, shape, begin, end) in zip(rows, entries):
        want_name, want_dtype, want_dims, want_crc = row[:4]
        check(name == want_name, "tensor %s in the header where %s was written" % (name, want_name))
        check(DTYPES[dtype][2] == want_dtype, "%s: dtype %s, expected %s" % (name, dtype, want_dtype))
        dims = "[" + ",".join(str(d) for d in shape) + "]"
        check(dims == want_dims, "%s: shape %s, expected %s" % (name, dims, want_dims))
        crc = zlib.crc32(view[data_start + begin : data_start + end])
        check(crc == int(want_crc), "%s: crc32 %d, expected %s" % (name, crc, want_crc))
        size = DTYPES[dtype][1]
        for sample in row[4:]:
            i, want = sample.split("=")
            got = element(buf, data_start + begin + int(i) * size, dtype)
            check(float(got) == float(want), "%s[%s] = %r, expected %s" % (name, i, got, want))
        elements += (end - begin) // size
    return len(entries), elements, len(buf)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    folder = sys.argv[1]
    names = sorted(f[: -len(".expected")] for f in os.listdir(folder) if f.endswith(".expected"))
    if not names:
        sys.exit("no *.expected files in %s" % folder)
    failed = False
    for name in names:
        start = time.monotonic()
        path = os.path.join(folder, name + ".safetensors")
        try:
            tensors, elements, size = compare(path, os.path.join(folder, name + ".expected"))
            print("%s: %d tensors, %d elements, %d bytes: all match (%.2f s)"
                  % (path, tensors, elements, size, time.monotonic() - start))
        except (Mismatch, KeyError, ValueError, TypeError) as e:
            print("%s: MISMATCH: %s" % (path, e))
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
