"""What the comparison scripts' Python arms share about the reference environment (issue 60).

The reference environment is the virtual environment bench/reference-env.sh makes, with the
releases pinned there (the pins are read from that script, so they live in one place). The
drivers run a script with $REFERENCE_ENV/bin/python (REFERENCE_ENV defaults to .reference-env/
at the checkout's root, bench/reference-python.sh). Here:

  require(names)   import check: a missing package stops the script with how to make the
                   environment; a version other than the pin prints a warning line and goes on
                   (a number from it is then not a reference number, and its log says so).
  versions_line()  "reference: torch 2.15.0+cu132, transformers 5.23.0, ..." for a log.
  torch_line()     the torch arm's build as a log must record it: version, BLAS (MKL or
                   OpenBLAS and its version), oneDNN's version, the CPU capability torch
                   dispatches to and the threads. It reads torch.__config__.show(), so it also
                   serves an older torch (the PyTorch 1.13 arm of compare_train_step.sh).
"""
import importlib
import importlib.metadata
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "reference-env.sh")
HOW = ("this script runs in the reference environment: make it with bench/reference-env.sh (it "
       "creates .reference-env/ at the checkout's root; REFERENCE_ENV names another folder), "
       "then run this script with $REFERENCE_ENV/bin/python")


def pins():
    """{distribution: version} of bench/reference-env.sh's pins=( ... ) list."""
    text = open(SCRIPT, encoding="utf-8").read()
    block = re.search(r"^pins=\((.*?)^\)", text, re.S | re.M)
    return dict(re.findall(r"^\s*([A-Za-z0-9_.-]+)==(\S+)", block.group(1), re.M)) if block else {}


def require(names):
    """Imports each module of names; exits with HOW when one is missing, warns when its version
    is not the pin."""
    pinned = pins()
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as e:
            sys.exit(f"{os.path.basename(sys.argv[0])}: {e} under {sys.executable}: {HOW}")
        want = pinned.get(name)
        have = importlib.metadata.version(name)
        if want and have.split("+")[0] != want:
            print(f"warning: {name} {have} is not bench/reference-env.sh's pin {want}: "
                  f"not a reference number", flush=True)


def versions_line(names):
    return "reference: " + ", ".join(
        f"{n} {importlib.metadata.version(n)}" for n in names) + f" ({sys.executable})"


def torch_line():
    import torch
    config = torch.__config__.show()

    def find(pattern):
        m = re.search(pattern, config)
        return m.group(1) if m else None

    blas = find(r"BLAS_INFO=(\w+)") or "?"
    mkl = find(r"Math Kernel Library Version ([\d.]+)")
    openblas = find(r"OpenBLAS (\S+)")
    onednn = find(r"MKL-DNN (v\S+)")
    capability = find(r"CPU capability usage: (\S+)") or "?"
    blas_text = {"mkl": f"MKL {mkl}" if mkl else "MKL"}.get(blas, blas)
    if openblas:
        blas_text += f" {openblas}"
    return (f"torch {torch.__version__}: BLAS {blas_text}, oneDNN "
            f"{onednn if onednn and torch.backends.mkldnn.is_available() else 'none'}, CPU "
            f"capability {capability}, {torch.get_num_threads()} threads")
