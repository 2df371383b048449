"""`python3 -m gpusim_torch compare-compile STEP.py`: the same step recorded
eager and torch.compile'd (setup(device, ..., compile=False|True)), each
replayed with gpusim, and the difference explained by buffer: what is live
at each peak, grouped by module (a compiled graph's blocks carry the module
of the FX nodes that made them: inductor_plan.py), and the compiled graphs'
plans.

Output: text (a table and the modules that differ most), json, or one
markdown table row (docs/pytorch.md's eager-vs-compiled table is made by
tools/compile_table.py from these rows)."""

import json
import os
import re
import subprocess
import tempfile


def _run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise ValueError("%s: %s" % (" ".join(cmd[:3]), (r.stderr or r.stdout).strip()))
    return json.loads(r.stdout)


def module_of(name):
    """The grouping key of a buffer named by the recorder: its module path
    (eager `layers.0.attn:mm`, compiled `layers.0.attn:0_forward/buf3/mm`)
    with layer indices folded (`layers.*.attn`), or its whole name when it
    has none (parameters, gradients, workspaces)."""
    if ":" not in name:
        return name
    return re.sub(r"\.\d+(?=\.|$)", ".*", name.split(":", 1)[0])


def measure(gpusim, trace, device, allocator):
    """The replay's figures and the blocks live at the peak (explain)."""
    rep = _run([gpusim, "replay", trace, "--device", device, "--allocator", allocator, "--format", "json"])
    exp = _run([gpusim, "explain", trace, "--device", device, "--format", "json",
                "--top", "1000000"])
    by_module = {}
    for b in exp["largest"]:
        k = module_of(b["name"])
        by_module.setdefault(k, []).append((b["name"], b["bytes"]))
    return dict(peak_allocated=rep["allocator"]["peak_allocated_bytes"],
                peak_reserved=rep["allocator"]["peak_reserved_bytes"],
                step_time_s=rep["step"]["step_time_s"], peak_live=exp["peak_live_bytes"],
                by_module=by_module)


def compare(record, args, setup_kw, gpusim, device, allocator, keep=None):
    """Records both variants (record(out, kw) -> Recording) and measures
    them; the comparison as a dict."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        where = keep or tmp
        os.makedirs(where, exist_ok=True)
        for variant, flag in (("eager", False), ("compiled", True)):
            trace = os.path.join(where, "%s.gpusim" % variant)
            rec = record(trace, dict(setup_kw, compile=flag))
            m = measure(gpusim, trace, device, allocator)
            m["trace"] = trace if keep else None
            m["graphs"] = [dict(name=p.name, kernels=len(p.kernels),
                                blocks=len(p.allocations()), bytes=sum(a.nbytes for a in p.allocations()),
                                outputs=sum(1 for o in p.outputs if o[0] != "none"))
                           for p in getattr(rec, "compiled", [])]
            out[variant] = m
    if not out["compiled"]["graphs"]:
        raise ValueError("%s: setup(..., compile=True) compiled nothing (no graph reached Inductor)" % args.step_file)
    diffs = []
    e, c = out["eager"]["by_module"], out["compiled"]["by_module"]
    for k in sorted(set(e) | set(c)):
        eb = sum(b for _, b in e.get(k, []))
        cb = sum(b for _, b in c.get(k, []))
        if eb != cb:
            diffs.append(dict(module=k, eager_bytes=eb, compiled_bytes=cb, eager=sorted(e.get(k, []), key=lambda x: -x[1]),
                              compiled=sorted(c.get(k, []), key=lambda x: -x[1])))
    diffs.sort(key=lambda d: (-abs(d["compiled_bytes"] - d["eager_bytes"]), d["module"]))
    for v in out.values():
        del v["by_module"]
    out["differences"] = diffs
    return out


def _b(n):
    return "{:,}".format(n)


def render_text(step, device, r, top=8):
    lines = ["%s on %s, eager vs torch.compile'd (gpusim replay and explain):" % (step, device)]
    lines.append("  %-22s %22s %22s %16s" % ("", "eager", "compiled", "difference"))
    for key, label in (("peak_allocated", "peak allocated B"), ("peak_reserved", "peak reserved B"),
                       ("peak_live", "live at the peak B")):
        e, c = r["eager"][key], r["compiled"][key]
        lines.append("  %-22s %22s %22s %+16.2f%%" % (label, _b(e), _b(c), 100.0 * (c - e) / e if e else 0.0))
    e, c = r["eager"]["step_time_s"], r["compiled"]["step_time_s"]
    lines.append("  %-22s %22.4f %22.4f %+16.2f%%" % ("step time s", e, c, 100.0 * (c - e) / e if e else 0.0))
    lines.append("  compiled graphs:")
    for g in r["compiled"]["graphs"]:
        lines.append("    %-14s %4d kernels, %4d blocks planned (%s B), %d outputs"
                     % (g["name"], g["kernels"], g["blocks"], _b(g["bytes"]), g["outputs"]))
    lines.append("  live at the peak by module, largest differences first (buffer: bytes):")
    for d in r["differences"][:top]:
        lines.append("    %-40s eager %s B, compiled %s B (%+d B)" % (
            d["module"], _b(d["eager_bytes"]), _b(d["compiled_bytes"]), d["compiled_bytes"] - d["eager_bytes"]))
        for side in ("eager", "compiled"):
            items = d[side][:4]
            if items:
                more = len(d[side]) - len(items)
                lines.append("      %-9s %s%s" % (side + ":", ", ".join("%s %s" % (n, _b(b)) for n, b in items),
                                                  " and %d more" % more if more > 0 else ""))
    return "\n".join(lines)


def render_markdown_row(label, device, r):
    e, c = r["eager"], r["compiled"]

    def pct(a, b):
        return "%+.1f%%" % (100.0 * (b - a) / a) if a else "n/a"
    graphs = ", ".join("%s %d kernels" % (g["name"], g["kernels"]) for g in c["graphs"])
    return "| %s | %s | %s | %s (%s) | %s | %s (%s) | %.4f / %.4f s | %s |" % (
        label, device, _b(e["peak_allocated"]), _b(c["peak_allocated"]), pct(e["peak_allocated"], c["peak_allocated"]),
        _b(e["peak_reserved"]), _b(c["peak_reserved"]), pct(e["peak_reserved"], c["peak_reserved"]),
        e["step_time_s"], c["step_time_s"], graphs)
