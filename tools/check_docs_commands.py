#!/usr/bin/env python3
"""Checks every `gpusim ...` command in a fenced block of README.md and
docs/*.md against the binary: the subcommand exists, every --option is one
the subcommand's --help lists, and every command whose inputs are all in the
checkout (no placeholder such as CONFIG or [--set ...], no user file such as
step.hlo) runs and exits 0, its --out directed to a temporary directory.
Prints one line per command (ran / options checked, and why not run);
exit 1 with FILE:LINE: what is wrong. Usage: check_docs_commands.py GPUSIM [ROOT]"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

FILE_SUFFIXES = (".yaml", ".yml", ".hlo", ".hlo.gz", ".pickle", ".json", ".json.gz", ".gz", ".gpusim", ".jsonl",
                 ".txt", ".py", ".csv")
TIMEOUT_S = 180


def commands(root):
    pages = [os.path.join(root, "README.md")]
    pages += sorted(os.path.join(root, "docs", p) for p in os.listdir(os.path.join(root, "docs")) if p.endswith(".md"))
    for page in pages:
        code, buf, start = False, "", 0
        for n, line in enumerate(open(page, encoding="utf-8"), 1):
            if line.startswith("```"):
                code, buf = not code, ""
                continue
            if not code:
                continue
            text = line.rstrip("\n")
            if buf:
                buf += " " + text.strip()
            elif re.match(r"\s*(\$\s+)?(build/)?gpusim\s", text):
                buf, start = re.sub(r"^\s*(\$\s+)?", "", text), n
            else:
                continue
            if buf.endswith("\\"):
                buf = buf[:-1]
                continue
            yield os.path.relpath(page, root), start, buf
            buf = ""


def help_text(gpusim, sub, cache={}):
    if sub not in cache:
        args = [gpusim, "--help"] if sub is None else [gpusim, sub, "--help"]
        p = subprocess.run(args, capture_output=True, text=True)
        cache[sub] = p.stdout if p.returncode == 0 else None
    return cache[sub]


def why_not_runnable(tokens, root):
    for t in tokens[1:]:
        if re.search(r"[\[\]|]|\.\.\.|\$", t):
            return f"placeholder or shell syntax {t!r}"
        if re.fullmatch(r"[A-Z][A-Z_.]*[A-Z](\.[a-z.]+)?", t):
            return f"placeholder {t!r}"
        if " " not in t and t.endswith(FILE_SUFFIXES) and not t.startswith("-"):
            value = t.split("=", 1)[-1]
            if not os.path.exists(os.path.join(root, value)):
                return f"needs the user's file {value!r}"
    return None


def main(argv):
    if not argv:
        sys.exit(__doc__)
    gpusim = os.path.abspath(argv[0])
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    errors, ran, checked = [], 0, 0
    for page, line, text in commands(root):
        where = f"{page}:{line}"
        try:
            tokens = shlex.split(text, comments=True)
        except ValueError as e:
            errors.append(f"{where}: cannot split the command ({e}): {text}")
            continue
        tokens = [t for t in tokens if t != "\\"]
        # `gpusim --help, gpusim SUBCOMMAND --help` style synopsis lines.
        if len(tokens) < 2 or tokens[1].startswith("-"):
            continue
        sub = tokens[1]
        sub_help = help_text(gpusim, sub)
        if sub_help is None:
            errors.append(f"{where}: `gpusim {sub}` is not a subcommand: {text}")
            continue
        known = set(re.findall(r"--[a-z][a-z0-9-]*", sub_help + (help_text(gpusim, None) or "")))
        for t in tokens[2:]:
            opt = t.split("=", 1)[0]
            if re.fullmatch(r"--[a-z][a-z0-9-]*", opt) and opt not in known:
                errors.append(f"{where}: `gpusim {sub}` has no option {opt}: {text}")
        why = why_not_runnable(tokens, root)
        if why is not None:
            checked += 1
            print(f"{where}: options checked, not run ({why}): {text}")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            args = [gpusim] + tokens[1:]
            for k in range(len(args) - 1):
                if args[k] == "--out":
                    args[k + 1] = os.path.join(tmp, "out")
            try:
                p = subprocess.run(args, cwd=root, capture_output=True, text=True, timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                errors.append(f"{where}: did not finish in {TIMEOUT_S} s: {text}")
                continue
            if p.returncode != 0:
                errors.append(f"{where}: exit {p.returncode}: {text}\n  {p.stderr.strip()[:800]}")
                continue
        ran += 1
        print(f"{where}: ran, exit 0: {text}")
    print(f"{ran} documented commands ran and exited 0; {checked} had their options checked only")
    for e in errors:
        print(e, file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main(sys.argv[1:])
