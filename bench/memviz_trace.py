# A synthetic Chrome trace in the format `fitgrad train` writes (memory_trace.json), for
# measuring `fitgrad memviz` on traces far past the allocator's ring (bench/RESULTS.md,
# issue 31). Steps of a toy model: parameters once, then per step activations allocated in
# a forward mark and freed in a backward mark, with one temporary spike that makes the peak
# in the middle step. The peak instant follows its event, as the exporter writes it.
#
# Usage: python3 bench/memviz_trace.py EVENTS OUT.json
import json
import sys

n = int(sys.argv[1])
MiB = 1 << 20
SEG = 64 * MiB
ACTS = 200  # activations a step

state = {"seq": 0, "allocated": 0, "reserved": 0, "cat": {}, "offset": 0, "peak": None}


def write_event(f, args, cat, name):
    e = {"ph": "i", "cat": cat, "name": name, "ts": args["seq"], "pid": 1, "tid": 1, "s": "t",
         "args": args}
    f.write(",\n" + json.dumps(e, separators=(",", ":")))


def block(f, kind, category, label, size, offset):
    s = state
    delta = size if kind == "alloc" else -size
    s["allocated"] += delta
    s["cat"][category] = s["cat"].get(category, 0) + delta
    args = {"seq": s["seq"], "time_ns": s["seq"] * 1000, "kind": kind, "category": category,
            "label": label, "size": size, "segment": 0, "offset": offset,
            "addr": hex(0x10000000 + offset), "allocated_after": s["allocated"],
            "reserved_after": s["reserved"], "category_after": s["cat"][category]}
    write_event(f, args, "allocator", kind)
    s["seq"] += 1
    if s["peak"] is None or s["allocated"] > s["peak"][0]:
        s["peak"] = (s["allocated"], args["seq"], dict(s["cat"]), s.get("mark"))
        return True
    return False


def mark(f, text):
    s = state
    s["mark"] = text
    args = {"seq": s["seq"], "time_ns": s["seq"] * 1000, "kind": "mark", "label": text,
            "allocated_after": s["allocated"], "reserved_after": s["reserved"]}
    write_event(f, args, "mark", text)
    s["seq"] += 1


def peak_args():
    allocated, seq, cats, mark_text = state["peak"]
    rows = [{"category": c, "bytes": b, "percent": 100.0 * b / allocated}
            for c, b in sorted(cats.items(), key=lambda x: -x[1]) if b > 0]
    return {"allocated": allocated, "reserved": state["reserved"],
            "cached_free": state["reserved"] - allocated, "seq": seq, "time_ns": seq * 1000,
            "mark": mark_text, "by_category": rows,
            "top_labels": [{"label": r["category"], "bytes": r["bytes"], "percent": r["percent"]}
                           for r in rows],
            "other_labels": {"count": 0, "bytes": 0}}


def main():
    steps = max(1, (n - 4) // (2 * ACTS + 3))
    with open(sys.argv[2], "w") as f:
        f.write('{"traceEvents": [{"ph":"M","name":"process_name","pid":1,"tid":0,'
                '"args":{"name":"fitgrad memory (cpu)","device":"cpu","total_events":%d,'
                '"dropped":0}}' % n)
        s = state
        s["reserved"] = SEG
        args = {"seq": 0, "time_ns": 0, "kind": "segment_alloc", "size": SEG, "segment": 0,
                "addr": "0x10000000", "allocated_after": 0, "reserved_after": SEG}
        write_event(f, args, "allocator", "segment_alloc")
        s["seq"] = 1
        block(f, "alloc", "parameter", "weights", 8 * MiB, 0)
        spike_step = steps // 2
        written = False
        for step in range(steps):
            if s["seq"] >= n:
                break
            mark(f, "step %d / forward" % (step + 1))
            for i in range(ACTS):
                if s["seq"] >= n - 1:
                    break
                block(f, "alloc", "activation", "layers.%d" % i, 64 * 1024, 8 * MiB + i * 65536)
            if step == spike_step and s["seq"] < n - 1:
                block(f, "alloc", "temporary", "softmax", 16 * MiB, 24 * MiB)
                f.write(",\n" + json.dumps({"ph": "i", "cat": "peak", "name": "peak",
                                            "ts": s["seq"] - 1, "pid": 1, "tid": 0,
                                            "s": "g", "args": peak_args()}))
                written = True
                block(f, "free", "temporary", "softmax", 16 * MiB, 24 * MiB)
            mark(f, "step %d / backward" % (step + 1))
            for i in reversed(range(ACTS)):
                if s["seq"] >= n:
                    break
                block(f, "free", "activation", "layers.%d" % i, 64 * 1024, 8 * MiB + i * 65536)
        while s["seq"] < n:
            mark(f, "end")
        if not written:
            f.write(",\n" + json.dumps({"ph": "i", "cat": "peak", "name": "peak", "ts": 0,
                                        "pid": 1, "tid": 0, "s": "g", "args": peak_args()}))
        f.write("]}\n")


main()
