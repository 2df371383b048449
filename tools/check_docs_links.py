#!/usr/bin/env python3
"""Every relative link in README.md and docs/*.md names a file of the
checkout, and every #anchor a heading of its page (GitHub's and MkDocs'
slugs: lower case, punctuation dropped, spaces as '-'). Exit 1 with
FILE:LINE: what is broken. Usage: check_docs_links.py [ROOT]"""
import os
import re
import sys

root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))


def slug(text):
    text = re.sub(r"[`*_]", "", text.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(path):
    out, code = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            code = not code
        elif not code and re.match(r"#{1,6} ", line):
            out.add(slug(line.lstrip("#")))
    return out


pages = [os.path.join(root, "README.md")]
docs = os.path.join(root, "docs")
for dirpath, _, files in os.walk(docs):
    pages += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".md")]
bad = []
for page in pages:
    code = False
    for n, line in enumerate(open(page, encoding="utf-8"), 1):
        if line.startswith("```"):
            code = not code
            continue
        if code:
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            where = f"{os.path.relpath(page, root)}:{n}"
            if not os.path.exists(dest):
                bad.append(f"{where}: link to a missing file: {target}")
            elif frag and dest.endswith(".md") and frag not in headings(dest):
                bad.append(f"{where}: no heading #{frag} in {os.path.relpath(dest, root)}")
for b in bad:
    print(b)
print(f"{len(pages)} pages, {len(bad)} broken links")
sys.exit(1 if bad else 0)
