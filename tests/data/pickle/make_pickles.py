#!/usr/bin/env python3
"""Writes the pickle round-trip cases of sim/import/pickle_test.cc.

For each protocol 2, 3, 4, 5: roundtrip_pN.pickle, pickle.dumps of one
snapshot-shaped value holding every kind of plain value a snapshot can
(CPython's own pickler, so exactly its opcodes at that protocol), and
roundtrip.json, the JSON gpusim must read it as: the value through the rules
tools/snapshot_to_json.py --keep-frames applied (Note [Snapshot JSON from a
pickle], sim/import/pickle.cc), written by json.dumps. Stdlib only; rerun
(python3 tests/data/pickle/make_pickles.py) only to change the cases.
"""

import json
import math
import os
import pickle

HERE = os.path.dirname(os.path.abspath(__file__))


def value():
    frame = {"filename": "/src/model.py", "line": 12, "name": "forward"}
    stack = [frame, {"filename": "/src/train.py", "line": 7, "name": "<module>"}]
    return {
        "segments": [
            {"device": 0, "address": 139637976727552, "total_size": 2097152, "allocated_size": 512,
             "active_size": 512, "requested_size": 500, "stream": 0, "segment_type": "small",
             "is_expandable": False,
             "blocks": [{"address": 139637976727552, "size": 512, "requested_size": 500,
                         "state": "active_allocated", "frames": stack},
                        {"address": 139637976728064, "size": 2096640, "requested_size": 0,
                         "state": "inactive", "frames": []}]},
        ],
        "device_traces": [[
            {"action": "alloc", "addr": 139637976727552, "size": 512, "stream": 0,
             "time_us": 1776479641085368, "frames": stack},
            {"action": "free_requested", "addr": 139637976727552, "size": 512, "stream": 0,
             "time_us": 1776479641085399, "frames": stack},
        ]],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                               "max_split_size": -1, "garbage_collection_threshold": 0.0,
                               "expandable_segments": True, "roundup_power2_divisions": [1, 0, 2]},
        # Every scalar and container a pickler writes for plain data.
        "ints": [0, 1, 255, 256, 65535, 65536, -1, -129, 2**31 - 1, -2**31, 2**31, 2**63 - 1, -2**63, True, False],
        "floats": [0.0, -0.0, 1.5, 1e16, 1e15, 1e-5, 0.0001, 1 / 3, 5e-324, 1.7976931348623157e308,
                   float("nan"), float("inf"), -float("inf")],
        "strings": ["", "plain", "quote\" backslash\\ newline\n tab\t cr\r bs\b ff\f nul\x00 del\x7f",
                    "é €", "astral 😀", "x" * 300],
        "none": None,
        "tuples": [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)],
        "keys": {1: "int", 2.5: "float", True: "bool (True == 1: the first key stays, the last value wins)",
                 None: "None", "1": "str beside int 1: the same JSON key", -0.0: "zero"},
        "shared": [stack, stack, (stack, frame)],
        "nested": [[[[{"deep": [()]}]]]],
        "many": list(range(1200)),  # more than one APPENDS batch (pickle._BATCHSIZE = 1000)
    }


def plain(v):
    """snapshot_to_json.py's _plain with keep_frames."""
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if isinstance(k, bool) or k is None or isinstance(k, (int, float)):
                k = json.dumps(k)
            out[k] = plain(x)
        return out
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def main():
    v = value()
    for proto in (2, 3, 4, 5):
        with open(os.path.join(HERE, f"roundtrip_p{proto}.pickle"), "wb") as f:
            pickle.dump(v, f, protocol=proto)
    with open(os.path.join(HERE, "roundtrip.json"), "w", encoding="ascii") as f:
        f.write(json.dumps(plain(v), allow_nan=False, separators=(",", ":")))


if __name__ == "__main__":
    main()
