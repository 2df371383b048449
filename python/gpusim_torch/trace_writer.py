"""Writes a recorded step as a gpusim native trace (traces/FORMAT.md).

Version 1.8 when an elementwise op carries its TensorIterator loop (ops.py
elementwise_loop), else 1.7 when a convolution's facts carry its memory format (ops.py
conv_facts), else 1.6 when compute events carry host work (`host=`), else
version 1.5 when it carries a warm-up history (`warmup` lines: Note [The
warm-up history] in recorder.py), else version 1.3 when it is a distributed step (meta world_size, kind=broadcast;
Note [Collectives under a fake process group] in collectives.py), else
version 1.2 when the recording carries `meta` lines or op facts (`op=`,
`dims=`; Note [Op facts for the device model] in ops.py), which a
recording by the collector always does; frames (1.1): `frame ID FUNCTION
FILE LINE` lines (interned, each defined before the first event that uses
it) and the event key `stack=ID,ID,...` (innermost first). A recording
without any of them is version 1 and reads with any 1.x reader.
"""

_ESCAPE = set(range(0x00, 0x21)) | {0x7F} | {ord(c) for c in "%=,#"}


def escape_name(name):
    """A name as one token (bytes): `-` for empty, `%2D` for `-`, `%XX` for
    blanks, control bytes and `% = , #`; other bytes (UTF-8 too) as they are."""
    b = name.encode("utf-8", "surrogateescape")
    if not b:
        return b"-"
    if b == b"-":
        return b"%2D"
    out = bytearray()
    for c in b:
        if c in _ESCAPE:
            out += b"%%%02X" % c
        else:
            out.append(c)
    return bytes(out)


_token_bytes = escape_name


def format_flops(x):
    """A decimal that reads back as exactly the same double."""
    x = float(x)
    if x == int(x) and abs(x) < 2 ** 53:
        return str(int(x))
    return repr(x)


def write_trace(path, recording, frames=True):
    """Writes `recording` (a recorder.Recording) to `path` atomically."""
    import os
    import tempfile
    data = render_trace(recording, frames=frames)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _conv_layout(e):
    """A convolution's facts with the memory format (format 1.7: 18 facts,
    21 for a backward; ops.py conv_facts)."""
    op, dims = e.get("op"), e.get("dims") or ()
    return (op in ("convolution", "_convolution") and len(dims) == 18) or (
        op == "convolution_backward" and len(dims) == 21)


def render_trace(rec, frames=True):
    """The trace file's bytes. A pure function of the recording."""
    lines = []
    add = lines.append
    meta = getattr(rec, "meta", [])
    facts = bool(meta) or any("op" in e or "dims" in e for e in rec.events)
    distributed = any(k == "world_size" for k, _ in meta) or any(e.get("kind") == "broadcast" for e in rec.events)
    warmup = getattr(rec, "warmup", None)
    host = any("host" in e for e in rec.events)
    conv_layout = any(_conv_layout(e) for e in rec.events)
    loops = any(e.get("kind") == "elementwise" and e.get("op") for e in rec.events)
    add(b"gpusim-trace 1.8" if loops else b"gpusim-trace 1.7" if conv_layout else b"gpusim-trace 1.6" if host else b"gpusim-trace 1.5" if warmup else b"gpusim-trace 1.3" if distributed else
        b"gpusim-trace 1.2" if facts else b"gpusim-trace 1.1" if frames else b"gpusim-trace 1")
    add(b"# format: traces/FORMAT.md; recorded by python/gpusim_torch")
    for c in rec.comments:
        add(("# " + c).encode("utf-8", "surrogateescape"))
    add(b"name " + _token_bytes(rec.name))
    for k, v in meta:
        add(b"meta " + _token_bytes(k) + b" " + _token_bytes(v))
    add(b"stream 0 compute")
    if any(e.get("stream") == 1 for e in rec.events):
        add(b"stream 1 collective")
    # 1.5: the allocations, frees and cuBLAS ops before the window (Note [The warm-up
    # history], recorder.py), before the first event.
    for w in warmup or ():
        if w[0] == "alloc":
            add(b"warmup alloc %d %d" % (w[1], w[2]))
        elif w[0] == "free":
            add(b"warmup free %d" % w[1])
        else:  # ("compute", op, phase, dims)
            add(b"warmup compute " + _token_bytes(w[1]) + (b" phase=" + w[2].encode() if w[2] != "forward" else b"")
                + (b" dims=" + ",".join(str(d) for d in w[3]).encode() if w[3] else b""))
    defined = set()
    count = 0
    for ev in rec.events:
        stack = ev.get("stack") if frames else None
        if stack:
            for fid in stack:
                if fid not in defined:
                    fn, fl, ln = rec.frames[fid]
                    add(b"frame %d %s %s %d" % (fid, _token_bytes(fn), _token_bytes(fl), ln))
                    defined.add(fid)
        add(_event_line(ev, stack))
        count += 1
    add(b"end %d" % count)
    return b"\n".join(lines) + b"\n"


_KEY_ORDER = ("role", "name", "kind", "stream", "phase", "dtype", "flops", "read", "write",
              "group", "m", "n", "k", "batch", "recompute", "after", "uses", "dur_ns", "op", "dims", "host")


def _event_line(ev, stack):
    t = ev["type"]
    parts = [t.encode()]
    if t == "alloc":
        parts.append(b"%d %d" % (ev["buffer"], ev["size"]))
        parts.append(b"role=" + ev.get("role", "temporary").encode())
        if ev.get("name"):
            parts.append(b"name=" + _token_bytes(ev["name"]))
        skip = {"role", "name"}
    elif t == "free":
        parts.append(b"%d" % ev["buffer"])
        skip = {"role", "name"}
    else:  # compute, copy, marker
        parts.append(_token_bytes(ev["name"]))
        if t != "marker":
            parts.append(b"kind=" + ev.get("kind", "elementwise").encode())
        skip = {"name", "kind", "role"}
    for key in _KEY_ORDER:
        if key in skip or key not in ev:
            continue
        v = ev[key]
        if key == "phase" and v == "forward":
            continue
        if key == "flops":
            if v == 0:
                continue
            parts.append(b"flops=" + format_flops(v).encode())
        elif key == "host":  # 1.6: Note [Host work per kernel] (recorder.py)
            parts.append(b"host=" + ",".join(str(u) for u in v).encode())
        elif key in ("uses", "dims", "after"):
            if v:
                parts.append(key.encode() + b"=" + ",".join(str(u) for u in v).encode())
        elif key == "op":
            if v:
                parts.append(b"op=" + _token_bytes(v))
        elif key in ("read", "write", "m", "n", "k"):
            if v:
                parts.append(b"%s=%d" % (key.encode(), v))
        elif key == "batch":
            if v != 1:
                parts.append(b"batch=%d" % v)
        else:
            parts.append(b"%s=%s" % (key.encode(), str(v).encode()))
    if stack:
        parts.append(b"stack=" + ",".join(str(s) for s in stack).encode())
    return b" ".join(parts)
