#!/usr/bin/env python3
"""Golden data for data/nfc.h: Python's unicodedata.normalize("NFC") of a fixed set of strings
(decomposed and composed Latin, marks to reorder, singletons, composition exclusions, Hangul
jamo and syllables, Vietnamese, Greek, Devanagari, Arabic, CJK, emoji) and of 300 random
strings of code points drawn from the characters that NFC acts on, seed 7. The standard
library only:

    python3 tests/golden/gen_nfc_golden.py > tests/golden/nfc_cases.json
"""
import json
import random
import sys
import unicodedata

FIXED = [
    "café", "cafe\u0301", "A\u030A", "\u212B", "\u2126", "a\u0328\u0301", "a\u0301\u0328",
    "e\u0302\u0323", "\u1EC7", "\u0958", "\u0915\u093C", "\u1100\u1161\u11A8", "\uAC00\u11A8",
    "\u1100\u1161", "\uD55C\uAE00", "\u03B1\u0301\u0345", "Tie\u0302\u0301ng Vie\u0323\u0302t",
    "\u0627\u0653", "中文文本", "emoji 👍🏽 and 👨\u200d👩\u200d👧", "x\u0301\u0301\u0301",
    "\u0301starts with a mark", "o\u0308\u0304", "\u00F6\u0304", "\u1E0B\u0323", "q\u0307\u0323",
    "\u0F73", "\u0344", "\u00C5\u0301", "plain ASCII text",
]


def main():
    marks = [cp for cp in range(0x300, 0x370)] + [0x0323, 0x0328, 0x0345, 0x093C, 0x0653]
    letters = [ord(c) for c in "aeiouAEIOUnNcCsSzZyY"] + [0x1100, 0x1161, 0x11A8, 0xAC00,
                                                         0x03B1, 0x0627, 0x0915, 0x212B, 0xC5]
    rng = random.Random(7)
    randoms = []
    for _ in range(300):
        n = rng.randint(1, 8)
        randoms.append("".join(chr(rng.choice(marks if rng.random() < 0.5 else letters))
                               for _ in range(n)))
    cases = [{"text": t, "nfc": unicodedata.normalize("NFC", t)} for t in FIXED + randoms]
    json.dump({"unicode": unicodedata.unidata_version, "cases": cases}, sys.stdout,
              ensure_ascii=False, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
