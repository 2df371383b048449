#!/usr/bin/env python3
"""Convert a PyTorch CUDA memory snapshot pickle to JSON, without torch.

A snapshot (torch.cuda.memory._record_memory_history() followed by
torch.cuda.memory._dump_snapshot("x.pickle")) is a pickled dict of plain
Python values: dicts, lists, tuples, strings, numbers, booleans, None.
Loading an untrusted pickle can run arbitrary code through the classes it
names, so this loader refuses EVERY class (find_class always raises) and
every persistent id: a file that needs any class is rejected, not executed.

Usage: snapshot_to_json.py SNAPSHOT.pickle [OUT.json] [--keep-frames]
Writes OUT.json (or stdout). Stack frames ("frames" lists) are dropped
unless --keep-frames is given (they can be most of the file); gpusim's
LoadSnapshot passes it and interns them (sim/import/snapshot.cc). Tuples become lists; dict keys become strings; NaN and
infinities become null (JSON has no such numbers); bytes are rejected.
Exit status: 0 on success, 1 on a refused or malformed pickle, 2 on usage.
Stdlib only.
"""

import io
import json
import math
import pickle
import pickletools
import sys


class RefusingUnpickler(pickle.Unpickler):
    """An Unpickler that refuses every class and every persistent id."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(
            f"refusing to load class {module}.{name}: a memory snapshot holds "
            "only plain Python values")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refusing a persistent id")


# A pickle can reference one object many times (its memo), so a few hundred
# bytes of nested shared lists expand exponentially when written out as
# JSON. Every value written counts against a budget proportional to the
# file's size (a real snapshot's values each take at least a byte or two of
# pickle); a file past it is refused (gpusim issue 17).
class _Budget:
    def __init__(self, file_bytes):
        self.left = 4 * file_bytes + 100000

    def take(self):
        self.left -= 1
        if self.left < 0:
            raise ValueError("it expands to far more values than its size "
                             "allows (shared references nested to blow up?)")


def _plain(value, keep_frames, budget):
    """The value as JSON-ready plain data."""
    budget.take()
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not keep_frames and k == "frames":
                continue
            if isinstance(k, bool) or k is None or isinstance(k, (int, float)):
                k = json.dumps(k)
            elif not isinstance(k, str):
                raise ValueError(f"unsupported dict key type {type(k).__name__}")
            out[k] = _plain(v, keep_frames, budget)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(v, keep_frames, budget) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and \
            not -2**63 <= value < 2**63:
        raise ValueError(f"an integer of {value.bit_length()} bits does not "
                         "fit in 64 bits")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(f"unsupported value type {type(value).__name__}")


def _pickle_offset(data):
    """Where in the pickle `data` reading fails: (offset, what) of the first
    opcode pickletools cannot read (a length past the end, a bad opcode), or
    of the first opcode that names a class; None when every opcode reads."""
    stream = io.BytesIO(data)
    start = 0  # where the opcode being read starts
    try:
        for op, _arg, pos in pickletools.genops(stream):
            if op.name in _CLASS_OPS:
                return pos, f"opcode {op.name}"
            start = stream.tell()
    except Exception as e:  # noqa: BLE001: any failure is located, not raised
        return start, f"the opcode there: {e}"
    return None


# Opcodes that load a class or call one (what RefusingUnpickler refuses).
_CLASS_OPS = {"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "NEWOBJ",
              "NEWOBJ_EX", "BUILD", "PERSID", "BINPERSID", "EXT1", "EXT2",
              "EXT4"}


def main(argv):
    args = [a for a in argv[1:] if a != "--keep-frames"]
    keep_frames = "--keep-frames" in argv[1:]
    if len(args) not in (1, 2):
        print(__doc__.split("\n\n")[2], file=sys.stderr)
        return 2
    path = args[0]
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        print(f"{path}: {e.strerror or e}", file=sys.stderr)
        return 1
    # Every failure of a hostile pickle is a message naming the file and a
    # byte offset in the pickle, never a traceback (gpusim issue 27: a
    # 20-byte pickle claiming a 2^63-byte string raised OverflowError with
    # the build path in its traceback). Exception, not a list: the
    # unpickler raises whatever its opcodes' arguments provoke.
    try:
        stream = io.BytesIO(raw)
        data = RefusingUnpickler(stream).load()
        budget = _Budget(stream.tell())
    except Exception as e:  # noqa: BLE001
        where = _pickle_offset(raw)
        at = f"byte {where[0]} ({where[1]}): " if where else ""
        print(f"{path}: {at}not a plain-data memory snapshot: "
              f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    try:
        plain = _plain(data, keep_frames, budget)
    except (ValueError, MemoryError, RecursionError) as e:
        print(f"{path}: not a plain-data memory snapshot: {e}", file=sys.stderr)
        return 1
    if not isinstance(plain, dict):
        print(f"{path}: expected a dict at the top level, got "
              f"{type(data).__name__}", file=sys.stderr)
        return 1
    text = json.dumps(plain, allow_nan=False, separators=(",", ":"))
    if len(args) == 2:
        with open(args[1], "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
