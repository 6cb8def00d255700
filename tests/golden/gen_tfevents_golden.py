#!/usr/bin/env python3
"""Golden data for fitgrad's TensorBoard event files (io/tfevents.h), and the converse check:
TensorBoard's own reader on a file fitgrad wrote.

How to run (needs the `tensorboard` package in a venv, without TensorFlow: TensorBoard then
reads records with its own reader, which checks both CRCs of every record; CI does NOT run
this, it only reads the committed output):

    python3 -m venv --system-site-packages /tmp/tbvenv && /tmp/tbvenv/bin/pip install tensorboard
    /tmp/tbvenv/bin/python tests/golden/gen_tfevents_golden.py            # rewrites the golden file
    /tmp/tbvenv/bin/python tests/golden/gen_tfevents_golden.py --out F    # writes F instead
    /tmp/tbvenv/bin/python tests/golden/gen_tfevents_golden.py PATH       # checks fitgrad's file(s)

Writing: the events below, serialized by TensorBoard's protobuf classes (tensorboard.compat.
proto event_pb2 and summary_pb2) and framed by its RecordWriter (tensorboard.summary.writer.
record_writer, the framing and masked CRC-32C of its EventFileWriter), go to
tests/golden/tfevents/expected.tfevents: the version event ("brain.Event:2") at
VERSION_WALL_TIME, then one event per entry of EVENTS with simple_value scalars. The values
cover a zero (written although it is the default: simple_value is in a oneof), negative, tiny,
subnormal, large and not-float-exact values and a NaN; the steps cover 0 (left out of the
record), multi-byte varints and one past 2^32. EventFileWriter itself is not used because its
version event carries the current time and a source_metadata field that fitgrad does not
write. tests/io/tfevents_test.cpp encodes the same events (its table mirrors EVENTS) and
compares the bytes, and writes them through TfEventsWriter and compares the whole file. After
writing, the file is read back as in the check below.

Checking (PATH is an event file or a directory holding some, e.g. the directory that
`fitgrad train --report_to tensorboard` logs to): every record is read with TensorBoard's
RawEventFileLoader, which checks both CRCs and stops at the first bad record (so the records
must span the whole file); the first event of each file must be the version event, every other
event must hold a step and simple_value scalars; and TensorBoard's Python loader,
EventAccumulator, must return the same (step, wall_time, value) series per tag. Prints one line
per tag (count, first and last points) and exits non-zero on any failure. TensorBoard's default
loader, its Rust data server, can be asked too:

    /tmp/tbvenv/bin/tensorboard --logdir PATH --port 6006 --load_fast=true &
    curl 'http://localhost:6006/data/plugin/scalars/scalars?run=.&tag=train/loss'
"""

import argparse
import math
import os
import struct
import sys

VERSION_WALL_TIME = 1767225600.125  # 2026-01-01, with a fraction

# (step, wall_time, [(tag, value), ...]); tests/io/tfevents_test.cpp has the same table.
EVENTS = [
    (0, 1767225601.5, [("train/loss", 10.8125), ("train/learning_rate", 0.0)]),
    (
        1,
        1767225602.0009766,
        [("train/loss", 10.5), ("train/learning_rate", 3e-4), ("train/grad_norm", 123.456)],
    ),
    (127, 1767225660.25, [("train/loss", -2.5), ("train/learning_rate", 1e-30)]),
    (128, 1767225661.0, [("eval/loss", 0.1), ("eval/perplexity", 3.0e38)]),
    (300, 1767225700.75, [("train/loss", float("nan")), ("train/grad_norm", 1e-40)]),
    (4294967296 + 5, 1767229200.5, [("eval/loss", 1.0), ("eval/accuracy", 0.999999)]),
]

VERSION = "brain.Event:2"
HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "tfevents", "expected.tfevents")


def write_golden(path):
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        writer = RecordWriter(f)
        version = event_pb2.Event(wall_time=VERSION_WALL_TIME, file_version=VERSION)
        writer.write(version.SerializeToString())
        for step, wall_time, values in EVENTS:
            summary = summary_pb2.Summary(
                value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in values]
            )
            event = event_pb2.Event(wall_time=wall_time, step=step, summary=summary)
            writer.write(event.SerializeToString())
        writer.flush()
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {1 + len(EVENTS)} records)")


def event_files(path):
    if os.path.isfile(path):
        return [path]
    names = sorted(n for n in os.listdir(path) if "tfevents" in n)
    return [os.path.join(path, n) for n in names]


def same_value(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def check(path):
    """TensorBoard's readers on `path`; returns {tag: [(step, wall_time, value)]}."""
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2

    files = event_files(path)
    if not files:
        sys.exit(f"{path}: no event file (a name containing 'tfevents') here")
    raw = {}
    for name in files:
        # Every record of the file: the reader stops at a bad CRC or a cut frame, which the
        # byte count below notices against the file's size.
        records = list(RawEventFileLoader(name).Load())
        events = [event_pb2.Event.FromString(r) for r in records]
        if not events or events[0].file_version != VERSION:
            sys.exit(f"{name}: the first event is not the version event '{VERSION}'")
        if any(e.HasField("file_version") for e in events[1:]):
            sys.exit(f"{name}: a second version event")
        for e in events[1:]:
            if not e.HasField("summary") or not e.summary.value:
                sys.exit(f"{name}: step {e.step} holds no summary values")
            for v in e.summary.value:
                if v.WhichOneof("value") != "simple_value":
                    sys.exit(f"{name}: step {e.step} tag '{v.tag}' is not a simple_value")
                raw.setdefault(v.tag, []).append((e.step, e.wall_time, v.simple_value))
        framed = sum(16 + len(r) for r in records)
        if framed != os.path.getsize(name):
            sys.exit(f"{name}: {os.path.getsize(name)} bytes, but its records span {framed}")
        print(f"{name}: {len(events)} records, all CRCs good")

    acc = event_accumulator.EventAccumulator(
        path, size_guidance={event_accumulator.SCALARS: 0}
    ).Reload()
    tags = acc.Tags()["scalars"]
    if sorted(tags) != sorted(raw):
        sys.exit(f"EventAccumulator tags {sorted(tags)} != the records' tags {sorted(raw)}")
    for tag in sorted(raw):
        got = [(s.step, s.wall_time, s.value) for s in acc.Scalars(tag)]
        want = raw[tag]
        if len(got) != len(want) or not all(
            g[0] == w[0] and g[1] == w[1] and same_value(g[2], w[2]) for g, w in zip(got, want)
        ):
            sys.exit(f"tag {tag}: EventAccumulator gives {got}, the records hold {want}")
        first, last = got[0], got[-1]
        print(
            f"  {tag}: {len(got)} points, first (step {first[0]}, {first[2]:.7g}), "
            f"last (step {last[0]}, {last[2]:.7g})"
        )
    return raw


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", nargs="?", help="an event file or directory to check")
    ap.add_argument("--out", default=GOLDEN, help="where to write the golden file")
    args = ap.parse_args()
    if args.path:
        check(args.path)
        print("OK: TensorBoard's readers load every record")
        return
    write_golden(args.out)
    got = check(args.out)
    want = {}
    for step, wall_time, values in EVENTS:
        for tag, value in values:
            want.setdefault(tag, []).append((step, wall_time, value))
    for tag, points in want.items():
        for (s, w, v), (gs, gw, gv) in zip(points, got[tag]):
            # simple_value is a float: compare with the value rounded to float32.
            v32 = struct.unpack("<f", struct.pack("<f", v))[0]
            if (s, w) != (gs, gw) or not same_value(v32, gv):
                sys.exit(f"tag {tag}: wrote {(s, w, v)}, read back {(gs, gw, gv)}")
    print("OK: the golden file reads back as written")


if __name__ == "__main__":
    main()
