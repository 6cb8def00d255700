"""The real SmolLM2 GGUF file, as the SmolLM2 generators find and identify it.

gen_smollm2_golden.py and gen_smollm2_fixture.py both read the file that
tools/fetch-smollm2.sh fetches, from the place the C++ tests look (FITGRAD_SMOLLM2, else
FITGRAD_CACHE or ~/.cache/fitgrad), and record its SHA-256 next to their output. This
module holds that shared part and imports nothing beyond the standard library, so the
fixture generator runs without torch.
"""
import argparse
import hashlib
import os

MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def parse_args():
    """--model (default: where the tests look) and --out (default: this folder)."""
    ap = argparse.ArgumentParser()
    cache = os.environ.get("FITGRAD_CACHE") or os.path.expanduser("~/.cache/fitgrad")
    ap.add_argument("--model", default=os.environ.get("FITGRAD_SMOLLM2") or
                    os.path.join(cache, MODEL_NAME))
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    return ap.parse_args()


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
