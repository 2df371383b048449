"""A --snapshot pickle in PyTorch's own torch.cuda._memory_viz, its totals
against gpusim's JSON report (tests/memory_viz_test.sh runs it).

Usage: memory_viz_check.py SNAPSHOT.pickle REPORT.json run|replay

Runs with Debian's python3-torch (/usr/bin/python3). PyTorch 1.13's
_memory_viz takes the segment list (segments, memory, stats); from 2.0 on its
functions take the snapshot dict and trace_plot draws device_traces, so each
is called the way the installed version defines it.
"""
import inspect
import json
import pickle
import sys

import torch.cuda._memory_viz as mv


def main():
    snap_path, report_path, kind = sys.argv[1:4]
    with open(snap_path, "rb") as f:
        snap = pickle.load(f)
    with open(report_path) as f:
        report = json.load(f)
    assert set(snap) >= {"segments", "device_traces", "allocator_settings"}, sorted(snap)
    segments = snap["segments"]
    trace = snap["device_traces"][0]

    lines = []
    def capture(text, *args, **kwargs):
        lines.append(text)
        return "<svg/>"
    new_api = hasattr(mv, "trace_plot")  # PyTorch >= 2.0: functions take the dict
    arg = snap if new_api else segments
    mv.segments(arg, format_flamegraph=capture)
    mv.memory(arg, format_flamegraph=capture)
    stats = mv.stats(arg)  # asserts every segment's blocks add up to its total_size
    if new_api:
        html = mv.trace_plot(snap)
        assert "<html" in html.lower() or len(html) > 1000
    flame_bytes = sum(int(l.rsplit(" ", 1)[1]) for l in lines[0].splitlines())
    assert flame_bytes == stats["total_size"].value, (flame_bytes, stats["total_size"].value)

    # The trace's totals against the report's.
    reserved = peak_reserved = 0
    live = peak_live = 0
    for e in trace:
        a, size = e["action"], e["size"]
        if a in ("segment_alloc", "segment_map"):
            reserved += size
        elif a in ("segment_free", "segment_unmap"):
            reserved -= size
        elif a == "alloc":
            live += size
        elif a == "free_completed":
            live -= size
        peak_reserved = max(peak_reserved, reserved)
        peak_live = max(peak_live, live)
    pre = [b for s in segments for b in s["blocks"] if b["frames"] and b["frames"][0]["filename"] == "gpusim:preexisting"]
    pre_bytes = sum(b["size"] for b in pre)
    alloc = report["allocator"]
    got = {"segments at end": len(segments) - len(pre),
           "peak reserved": peak_reserved + pre_bytes,
           "peak live requested": peak_live + pre_bytes,
           "reserved at end": stats["total_size"].value - (reserved + pre_bytes)}
    if kind == "run":
        want = {"segments at end": alloc["segment_allocs"] - alloc["segment_frees"],
                "peak reserved": alloc["peak_reserved_bytes"],
                "peak live requested": report["memory"]["peak_bytes"],
                "reserved at end": 0}
    else:
        # `gpusim replay` of a snapshot starts from the state it rebuilds for
        # the window's start, and --snapshot re-simulates from that same state
        # (Note [One start state for every command]): like a real snapshot
        # whose window starts warm, the segments and blocks held at the start
        # have no trace entries. That state is the final one with the trace
        # undone: reserved and live requested bytes at the start are the
        # final totals less the trace's net changes.
        final_live = sum(b["requested_size"] for s in segments for b in s["blocks"]
                         if b["state"] == "active_allocated")
        start_reserved = stats["total_size"].value - reserved
        start_live = final_live - live
        got["peak reserved"] = start_reserved + peak_reserved
        got["peak live requested"] = start_live + peak_live
        want = {"peak reserved": alloc["peak_reserved_bytes"],
                "peak live requested": alloc["no_fragmentation_peak_bytes"]}
    for k in want:
        assert got[k] == want[k], f"{k}: snapshot {got[k]:,} vs report {want[k]:,}"
    print(f"ok: {snap_path}: {len(segments)} segments, {len(trace)} trace entries, "
          f"total_size {stats['total_size'].value:,} B, peak reserved {got['peak reserved']:,} B, "
          f"peak live {got['peak live requested']:,} B (= the report's)")


if __name__ == "__main__":
    main()
