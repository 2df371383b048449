#!/usr/bin/env python3
"""Fails when a C++ function in sim/, models/, viz/ or tools/ runs past 150 lines.

  tools/check_function_length.py REPO_ROOT [--list]

Issue 28 (deliverable 4): small functions, none over ~150 lines outside data
tables. A function's length is counted from the first line of its
declaration (the `template <...>` line included) to the line of its closing
brace. Tests (*_test.cc), benchmarks (*_benchmark.cc) and fuzzers
(*_fuzzer.cc) are not counted; data tables are, unless ALLOWED names them.

The scan is a small tokenizer, not a compiler: comments, string literals
(raw strings too), character literals and preprocessor lines are dropped;
the braces of namespaces, classes, structs, unions, enums and `extern "C"`
are looked through; any other top-level brace block whose header ends in `)`
(after const, noexcept, override, final, mutable, a trailing return type or
a constructor's member initialisers) is a function body, and so is a lambda
assigned at namespace scope (`auto f = [](...) {...};`). A lambda inside a
function is counted with that function.

Prints `file:line: function: N lines (limit 150)` for each function over the
limit and exits 1; an entry of ALLOWED that is no longer over the limit is an
error too, so the list shrinks as functions are split. --list prints every
function over the limit, allowed or not, and exits 0.
"""
import re
import sys
from pathlib import Path

LIMIT = 150
FOLDERS = ("sim", "models", "viz", "tools")
EXCLUDED_SUFFIXES = ("_test.cc", "_benchmark.cc", "_fuzzer.cc")

# (file, function) pairs allowed past the limit, each with its reason.
ALLOWED = {
    # Data tables: one row per upstream key or argument, read as a table.
    ("sim/config/maxtext_keys.cc", "MaxTextKeyTable"): "data table: one row per MaxText base.yml key",
    ("sim/config/megatron_args.cc", "Rules"): "data table: one row per Megatron-LM argument",
}

CONTAINER_KEYWORDS = {"namespace", "class", "struct", "union", "enum", "extern"}
QUALIFIERS = {"const", "noexcept", "override", "final", "mutable", "volatile", "&", "&&"}
ACCESS = {"public", "private", "protected"}

TOKEN = re.compile(
    r"""(?P<raw>R"(?P<delim>[^()\\\s]{0,16})\((?:.|\n)*?\)(?P=delim)")"""
    r"""|(?P<str>"(?:[^"\\\n]|\\.)*")"""
    r"""|(?P<chr>'(?:[^'\\\n]|\\.)*')"""
    r"""|(?P<lc>//[^\n]*)"""
    r"""|(?P<bc>/\*(?:.|\n)*?\*/)"""
    r"""|(?P<pp>^[ \t]*\#(?:[^\n\\]|\\.)*)"""
    r"""|(?P<num>\d[\w.']*)"""
    r"""|(?P<id>[A-Za-z_]\w*)"""
    r"""|(?P<op>::|->|&&|\S)""",
    re.M,
)


def Tokens(text):
    """Yields (token, line) with comments, literals and preprocessor lines dropped."""
    line = 1
    pos = 0
    for m in TOKEN.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        kind = m.lastgroup if m.lastgroup != "delim" else "raw"
        if kind in ("lc", "bc", "pp"):
            continue
        if kind in ("raw", "str", "chr"):
            yield ('""', line)
        else:
            yield (m.group(), line)


def IsFunctionHeader(stmt):
    """True when a top-level `{` after the tokens `stmt` opens a function body."""
    toks = [t for t, _ in stmt]
    if not toks:
        return False
    depth = 0
    top = []  # tokens at parenthesis depth 0
    for t in toks:
        if t in "([":
            depth += 1
        elif t in ")]":
            depth -= 1
        if depth == 0:
            top.append(t)
    i = len(toks) - 1
    while i >= 0 and toks[i] in QUALIFIERS:
        i -= 1
    if i >= 0 and toks[i] == ")":
        return not (CONTAINER_KEYWORDS & set(top) and "(" not in toks)
    # A trailing return type: `auto F(...) -> T {`.
    if "->" in top and ")" in toks:
        return not CONTAINER_KEYWORDS & set(top)
    # A constructor whose last member initialiser is braced: `: a_(x), b_{y} {`.
    for j in range(len(toks) - 1):
        if toks[j] == ")" and toks[j + 1] == ":":
            return toks[-1] == "}"
    return False


def FunctionName(stmt):
    """The declared name: the identifier before the first `(` at depth 0, or a lambda's variable."""
    toks = [t for t, _ in stmt]
    if "=" in toks and "[" in toks and toks.index("=") < toks.index("["):
        k = toks.index("=")
        return toks[k - 1] if k else "<lambda>"
    depth = 0
    for k, t in enumerate(toks):
        if t == "<":
            depth += 1
        elif t == ">":
            depth -= 1
        elif t == "(" and depth <= 0 and k > 0:
            if toks[k - 1] == "operator":  # operator()
                return "operator()"
            j = k - 1
            while j > 0 and not re.match(r"\w", toks[j]):
                j -= 1
            if toks[j] == "operator":  # operator==, operator[], ...
                return "operator" + "".join(toks[j + 1:k])
            name = toks[k - 1]
            if k >= 3 and toks[k - 2] == "::":
                name = toks[k - 3] + "::" + name
            return name
    return "<unknown>"


def Functions(text):
    """Yields (name, first_line, last_line) of every function body at namespace or class scope."""
    # Each open brace: "container" (looked through), "function" or "other".
    stack = []
    stmt = []  # tokens of the declaration being read at container scope
    fn = None  # (name, first_line, depth) of the function being read
    for tok, line in Tokens(text):
        in_container = all(kind == "container" for kind in stack)
        if tok == "{":
            if fn is None and in_container:
                if IsFunctionHeader(stmt):
                    fn = (FunctionName(stmt), stmt[0][1], len(stack))
                    stack.append("function")
                    stmt = []
                    continue
                top = {t for t, _ in stmt}
                kind = "container" if CONTAINER_KEYWORDS & top and "=" not in top else "other"
                stack.append(kind)
                if kind == "container":
                    stmt = []
                else:
                    stmt.append((tok, line))
                continue
            stack.append("other")
            if fn is None:
                stmt.append((tok, line))
            continue
        if tok == "}":
            kind = stack.pop() if stack else "container"
            if fn is not None and len(stack) == fn[2]:
                yield fn[0], fn[1], line
                fn = None
                stmt = []
                continue
            if fn is None:
                if kind == "container":
                    stmt = []
                elif all(k == "container" for k in stack):
                    stmt.append((tok, line))
            continue
        if fn is not None or not in_container:
            continue
        if tok == ";":
            stmt = []
        elif tok == ":" and stmt and stmt[-1][0] in ACCESS:
            stmt = []
        else:
            stmt.append((tok, line))


def SelfTest():
    """The scanner on small cases it must get right; returns the failures."""
    body = "  x();\n" * 3
    cases = [
        ("int F(int a) {\n" + body + "}\n", [("F", 1, 5)]),
        ("namespace a {\nnamespace {\nvoid G()\n    const {\n" + body + "}\n}\n}\n", [("G", 3, 8)]),
        ("struct S {\n public:\n  S(int a) : a_(a), b_{a} {\n" + body + "  }\n  int a_, b_;\n};\n",
         [("S", 3, 7)]),
        ("auto kF = [](int a) {\n" + body + "};\n", [("kF", 1, 5)]),
        ("auto H() -> int {\n" + body + "}\n", [("H", 1, 5)]),
        ("const std::vector<int> kTable = {\n  1,\n  2,\n};\nvoid K() { if (a) { b(); } }\n", [("K", 5, 5)]),
        ("void L() {\n  const char* s = \"}\";\n  // }\n  char c = '{';\n}\n", [("L", 1, 5)]),
        ("void M() {\n  auto r = R\"x(})x\";\n}\n", [("M", 1, 3)]),
        ('extern "C" {\nint N(void) {\n  return 0;\n}\n}\n', [("N", 2, 4)]),
        ("template <typename T>\nT O(T t) {\n  return t;\n}\n", [("O", 1, 4)]),
        ("bool operator==(const A& a, const A& b) {\n  return true;\n}\n", [("operator==", 1, 3)]),
        ("void P::Q(int a) {\n}\n", [("P::Q", 1, 2)]),
    ]
    failures = []
    for text, want in cases:
        got = list(Functions(text))
        if got != want:
            failures.append(f"self-test: {text!r}: got {got}, want {want}")
    return failures


def Scan(root):
    """Returns [(length, file, line, function)] of every function over LIMIT."""
    found = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".cc", ".h") or path.name.endswith(EXCLUDED_SUFFIXES):
                continue
            rel = path.relative_to(root).as_posix()
            for name, first, last in Functions(path.read_text(encoding="utf-8", errors="replace")):
                length = last - first + 1
                if length > LIMIT:
                    found.append((length, rel, first, name))
    return found


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    failures = SelfTest()
    for f in failures:
        print(f)
    if failures:
        return 1
    root = Path(argv[1])
    found = Scan(root)
    if "--list" in argv[2:]:
        for length, rel, line, name in sorted(found, reverse=True):
            note = ALLOWED.get((rel, name.split("::")[-1]), "")
            print(f"{rel}:{line}: {name}: {length} lines" + (f"  [allowed: {note}]" if note else ""))
        print(f"{len(found)} functions over {LIMIT} lines")
        return 0
    bad = 0
    seen = set()
    for length, rel, line, name in sorted(found):
        key = (rel, name.split("::")[-1])
        if key in ALLOWED:
            seen.add(key)
            continue
        print(f"{rel}:{line}: {name}: {length} lines (limit {LIMIT}); split it into helpers")
        bad += 1
    for key in sorted(set(ALLOWED) - seen):
        print(f"{key[0]}: {key[1]} is no longer over {LIMIT} lines: remove it from ALLOWED in "
              f"tools/check_function_length.py")
        bad += 1
    if bad:
        return 1
    print(f"no function over {LIMIT} lines outside the {len(seen)} allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
