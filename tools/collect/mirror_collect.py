"""What the collectors of a public repository's published figures share
(megatron_functional.py, simumax_b200.py): they read one pinned commit from a
local git mirror (git show; nothing is fetched) and write one JSON file, or
with --check say whether it is up to date."""

import argparse
import json
import os
import subprocess


def git_dir(mirror):
    """The mirror's git directory (a bare repository or a work tree's .git)."""
    dot = os.path.join(mirror, ".git")
    return dot if os.path.isdir(dot) else mirror


def git_show(who, mirror, commit, path):
    """The text of `path` at `commit`; exits naming the file when the mirror lacks it."""
    r = subprocess.run(["git", "--git-dir", mirror, "show", "%s:%s" % (commit, path)], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("%s: git show %s:%s in %s: %s" % (who, commit[:12], path, mirror, r.stderr.strip()))
    return r.stdout


def main(who, description, repo, out, collect, count):
    """--mirror DIR [--out FILE] [--check]: collect(git directory) -> the JSON document, written to FILE
    (count(document) says what was written), or compared with it (exit 1 when it differs)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--mirror", required=True, help="git directory of a %s mirror holding the pinned commit" % repo)
    p.add_argument("--out", default=out)
    p.add_argument("--check", action="store_true", help="exit 1 when --out differs from a fresh collection")
    a = p.parse_args()
    data = collect(git_dir(a.mirror))
    text = json.dumps(data, indent=1) + "\n"
    if a.check:
        with open(a.out) as f:
            same = f.read() == text
        print("%s: %s %s" % (who, a.out, "is up to date" if same else "differs from a fresh collection"))
        return 0 if same else 1
    with open(a.out, "w") as f:
        f.write(text)
    print("%s: wrote %s to %s" % (who, count(data), a.out))
    return 0
