#!/usr/bin/env python3
"""Regenerates the fuzz seed corpora in tests/fuzz/<target>/ from the small
recorded traces in traces/recorded/ and the shipped configs (stdlib only).

Usage: python3 tests/fuzz/make_seeds.py   (from the repository root)
Each seed is a few KB: a slice of a real input that keeps its shape.
"""
import gzip
import json
import os
import pickle
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REC = os.path.join(ROOT, "traces", "recorded")
OUT = os.path.join(ROOT, "tests", "fuzz")


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gz(data):
    return gzip.compress(data.encode() if isinstance(data, str) else data, mtime=0)


def kineto_slice(doc, n_mem, n_kernel, n_cpu, n_other, top_keys):
    ev = doc["traceEvents"]
    mem = [e for e in ev if e.get("name") == "[memory]"]
    gpu = [e for e in ev if e.get("cat") in ("kernel", "Kernel", "gpu_memcpy", "Memcpy",
                                                 "gpu_memset", "Memset")]
    cpu = [e for e in ev if e.get("cat") in ("cpu_op", "Operator", "user_annotation",
                                                 "gpu_user_annotation")]
    other = [e for e in ev if e.get("name") != "[memory]" and e not in gpu and e not in cpu]
    events = mem[:n_mem] + gpu[:n_kernel] + cpu[:n_cpu] + other[:n_other]
    for e in events:  # long demangled names add nothing
        if len(e.get("name", "")) > 60:
            e["name"] = e["name"][:60]
        if isinstance(e.get("args"), dict):
            e["args"] = {k: v for k, v in e["args"].items()
                         if not isinstance(v, (list, dict)) or k == "grid"}
    out = {k: doc[k] for k in top_keys if k in doc}
    if "deviceProperties" in out:
        out["deviceProperties"] = [{k: v for k, v in p.items()
                                    if k in ("id", "name", "totalGlobalMem", "numSms")}
                                   for p in out["deviceProperties"][:1]]
    out["traceEvents"] = events
    # One event per line, as Kineto writes.
    body = ",\n".join("  " + json.dumps(e) for e in events)
    head = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in out.items()
                     if k != "traceEvents")
    return "{" + head + (", " if head else "") + '"traceEvents": [\n' + body + "\n]}\n"


def load_gz(name):
    with gzip.open(os.path.join(REC, name), "rt") as f:
        return json.load(f)


def kineto():
    bert = load_gz("tracelens_h100_bert-small_inference.pt.trace.json.gz")
    s = kineto_slice(bert, 16, 3, 2, 3, ["schemaVersion", "deviceProperties", "traceName",
                                         "baseTimeNanoseconds"])
    write("kineto", "bert_small_h100.json", s)
    write("kineto", "bert_small_h100.json.gz", gz(s))
    rocm = load_gz("tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz")
    write("kineto", "mi300x_rocm.json", kineto_slice(rocm, 12, 2, 2, 1, ["deviceProperties"]))
    legacy = load_gz("kineto_tbplugin_resnet50_v100_legacy_noaddr.pt.trace.json.gz")
    ev = legacy["traceEvents"]
    gpu_mem = [e for e in ev if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
    legacy["traceEvents"] = gpu_mem[:10] + [e for e in ev if e.get("name") != "[memory]"][:8]
    write("kineto", "resnet50_v100_legacy_noaddr.json",
          kineto_slice(legacy, 10, 3, 3, 2, ["schemaVersion", "deviceProperties"]))
    # A bare top-level array is a Chrome trace too.
    write("kineto", "bare_array.json", json.dumps(gpu_mem[:4]) + "\n")
    # Note [Events of one shape] (sim/import/json_fast.h): [memory] events
    # written with one format, values of every length and kind in the holes,
    # and one with a blank more that breaks the shape.
    def mem(ts, addr, b, total):
        return ('{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 2, "ts": %s, '
                '"s": "t", "args": {"Device Type": 1, "Device Id": 0, "Addr": %s, "Bytes": %s, '
                '"Total Allocated": %s, "Total Reserved": 2097152, "Ev Idx": %s}}' % (ts, addr, b, total, ts))
    shaped = [mem(10, 140737488355328, 512, 512), mem(11, 140737488355328, -512, 0),
              mem(12, 8, 99999999999999999, 99999999999999999), mem(13, 8, -99999999999999999, 0),
              mem("14.5", 8, 1, 1), mem(15, 8, "1e3", 1), mem(16, 8, "12345678901234567890", 1),
              mem(17, '"8"', 1, 1), mem(18, 8, "01", 1), mem(19, 8, 2, 2).replace('"s": "t"', '"s":  "t"'),
              mem(20, 8, -2, 0)]
    write("kineto", "memory_events_of_one_shape.json",
          '{"traceEvents": [\n' + ",\n".join(shaped) +
          '\n], "deviceProperties": [{"id": 0, "name": "d", "totalGlobalMem": 1073741824}]}\n')


def memory_timeline():
    with gzip.open(os.path.join(REC, "hta_memory_timeline_raw.json.gz"), "rt") as f:
        rows = json.load(f)
    first_create = next(i for i, r in enumerate(rows) if r[1] == 2)
    first_bump = next(i for i, r in enumerate(rows) if r[1] == 3)
    first_destroy = next(i for i, r in enumerate(rows) if r[1] == 4)
    pick = rows[:6] + rows[first_create:first_create + 12] + rows[first_bump:first_bump + 8] + \
        rows[first_destroy:first_destroy + 8]
    text = json.dumps(pick)
    write("memory_timeline", "hta_rows.json", text)
    write("memory_timeline", "hta_rows.json.gz", gz(text))


class _PlainUnpickler(pickle.Unpickler):
    """Plain values only: every class refused, as gpusim's reader refuses it."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing to load class {module}.{name}")


def _load_snapshot_pickle():
    with open(os.path.join(REC, "cs336_gpt_training_snapshot.pickle"), "rb") as f:
        return _PlainUnpickler(f).load()


def _drop_frames(v):
    """Tuples as lists and no "frames" keys (the snapshot's JSON without its stacks)."""
    if isinstance(v, dict):
        return {k: _drop_frames(x) for k, x in v.items() if k != "frames"}
    if isinstance(v, (list, tuple)):
        return [_drop_frames(x) for x in v]
    return v


def snapshot():
    snap = _drop_frames(_load_snapshot_pickle())
    segs = snap["segments"]
    small = [s for s in segs if s["segment_type"] == "small"][:1]
    large = sorted((s for s in segs if s["segment_type"] == "large"),
                   key=lambda s: -len(s["blocks"]))[:1]
    for s in small + large:
        s["blocks"] = s["blocks"][:4]
    trace = snap["device_traces"][0][:30]
    for e in trace:
        e.pop("frames", None)
    settings = dict(snap["allocator_settings"])
    settings["roundup_power2_divisions"] = dict(list(settings["roundup_power2_divisions"].items())[:3])
    doc = {"segments": small + large, "device_traces": [trace], "allocator_settings": settings}
    write("snapshot", "cs336_gpt_training.json", json.dumps(doc))
    seg_actions = {"segments": large, "device_traces": [[
        {"action": "segment_alloc", "addr": 1 << 20, "size": 20971520, "stream": 0, "time_us": 1},
        {"action": "alloc", "addr": 1 << 20, "size": 512, "stream": 0, "time_us": 2},
        {"action": "free_requested", "addr": 1 << 20, "size": 512, "stream": 0, "time_us": 3},
        {"action": "free_completed", "addr": 1 << 20, "size": 512, "stream": 0, "time_us": 4},
        {"action": "segment_map", "addr": 1 << 22, "size": 2097152, "stream": 0, "time_us": 5},
        {"action": "segment_unmap", "addr": 1 << 22, "size": 2097152, "stream": 0, "time_us": 6},
        {"action": "oom", "addr": 0, "size": 1 << 40, "stream": 0, "time_us": 7},
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": 8},
        {"action": "segment_free", "addr": 1 << 20, "size": 20971520, "stream": 0, "time_us": 9}],
        []]}
    write("snapshot", "all_actions_two_devices.json", json.dumps(seg_actions, indent=1))


def pickle_seeds():
    """The pickle reader's seeds (sim/import/pickle_fuzzer.cc): a slice of the
    recorded snapshot pickled by CPython at protocols 2 to 5, one with shared
    stack frames, and hostile pickles (each refused with a byte offset)."""
    snap = _load_snapshot_pickle()
    small = {"segments": [dict(s, blocks=s["blocks"][:2]) for s in snap["segments"][:2]],
             "device_traces": [snap["device_traces"][0][:10]],
             "allocator_settings": snap["allocator_settings"]}
    for proto in (2, 3, 4, 5):
        write("pickle", f"cs336_slice_p{proto}.pickle", pickle.dumps(small, protocol=proto))
    frame = {"filename": "/src/model.py", "line": 12, "name": "forward"}
    stack = [frame, {"filename": "train.py", "line": 3, "name": "<module>"}]
    frames = {"segments": [], "device_traces": [[
        {"action": "alloc", "addr": 1 << 20, "size": 512, "stream": 0, "time_us": t, "frames": stack}
        for t in range(4)]], "keys": {1: 1.5, None: (True, False), 2.0: float("nan"), "x": "\u00e9\U0001f600"}}
    write("pickle", "shared_frames_p4.pickle", pickle.dumps(frames, protocol=4))
    bomb = [1]
    for _ in range(30):
        bomb = [bomb, bomb]
    write("pickle", "hostile_expansion_bomb.pickle", pickle.dumps({"segments": bomb}, protocol=4))
    write("pickle", "hostile_depth.pickle", b"\x80\x04}\x8c\x01v" + b"]" * 1200 + b"a" * 1199 + b"s.")
    write("pickle", "hostile_class.pickle", b"\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x04true\x85R.")
    write("pickle", "hostile_2pow63_string.pickle", b"\x80\x04\x8d" + (1 << 63).to_bytes(8, "little") + b"abc.")
    write("pickle", "hostile_memo_index.pickle", b"\x80\x04}r\xff\xff\xff\xff0j\xff\xff\xff\xffh\x07.")
    write("pickle", "hostile_frame_straddle.pickle",
          b"\x80\x04\x95\x06" + bytes(7) + b"}\x8c\x01vM\x01\x02\x03s.")
    write("pickle", "hostile_values.pickle", pickle.dumps(
        {"segments": [], "x": [b"bytes", {1, 2}, frozenset(), 10 ** 30, bytearray(b"a")]}, protocol=5))
    write("pickle", "truncated.pickle", pickle.dumps(small, protocol=4)[:200])


def trace_io():
    with open(os.path.join(ROOT, "traces", "FORMAT.md")) as f:
        md = f.read()
    start = md.index("```\ngpusim-trace 1") + 4
    write("trace_io", "format_md_example.trace", md[start:md.index("```", start)])
    write("trace_io", "alloc_free.trace",
          "gpusim-trace 1.0\nname t\nstream 0 compute\nalloc 0 1024 role=parameter name=w\n"
          "alloc 1 512\ncompute mm kind=matmul flops=1e9 read=1536 write=512 m=16 n=16 k=16 "
          "uses=0,1 dur_ns=100\ncopy c kind=host_to_device read=8 write=8 after=2\nfree 1\n"
          "free 0\nend 6\n")


def config():
    for src in ["configs/llama7b.yaml", "examples/scan_carry.yaml",
                "examples/gpt22b_korthikanti.yaml", "examples/maxtext/mixtral_8x7b_fsdp16.yaml"]:
        with open(os.path.join(ROOT, src)) as f:
            write("config", os.path.basename(src), f.read())
    # A run config with the device and model written inline (no file lookups).
    with open(os.path.join(ROOT, "configs/devices/h100-sxm-80gb.yaml")) as f:
        device = f.read()
    with open(os.path.join(ROOT, "configs/models/llama2-7b.yaml")) as f:
        model = f.read()
    indent = lambda t: "".join("  " + l if l.strip() else l for l in t.splitlines(True))
    write("config", "inline_device_model.yaml",
          "framework: pytorch\ndevice:\n" + indent(device) + "model:\n" + indent(model) +
          "batch: {per_device: 1, seq_len: 512}\n")


def main():
    for t in ["kineto", "memory_timeline", "snapshot", "pickle", "trace_io", "config"]:
        shutil.rmtree(os.path.join(OUT, t), ignore_errors=True)
    kineto()
    memory_timeline()
    snapshot()
    pickle_seeds()
    trace_io()
    config()


if __name__ == "__main__":
    main()
