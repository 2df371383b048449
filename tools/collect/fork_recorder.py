#!/usr/bin/env python3
"""A fork server for `python -m gpusim_torch record ...`, for tools that
record many steps in a row (check_zoo.collect_rows: the 40 cases of
docs/validation_torch_zoo.md and docs/validation_step_time.md).

It imports torch, transformers and timm once (those installed), then reads
one JSON request a line on stdin, {"argv": [...], "stdout": PATH,
"stderr": PATH}, forks, and the child runs gpusim_torch.cli.main(argv), as
`python -m gpusim_torch ARGV...` does, with its output in the two files;
the server answers {"rc": EXIT_CODE} on stdout once the child has exited.
Each recording still starts from a process of its own (the fork): what one
recording changes (modules' state, torch's settings, the step file's
globals) never reaches the next. What it saves is the imports: a fresh
interpreter spent about 9 s of each case's 13 s importing torch,
transformers and timm on the project's 2-core machine (session 21).

The server runs no torch operation before forking (imports only), so no
OpenMP thread pool exists to be lost in the child (GNU libgomp's pool does
not survive fork).

    python fork_recorder.py   (Client starts it, with gpusim_torch importable)"""

import json
import os
import subprocess
import sys
import traceback


def _child(req):
    code = 1
    try:
        for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
            os.close(f)
        sys.argv = ["gpusim_torch"] + list(req["argv"])
        from gpusim_torch.cli import main
        code = main(sys.argv[1:])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # the child reports every failure as its exit code
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) and 0 <= code < 256 else 1)


class Client:
    """Runs `PYTHON -m gpusim_torch ARGV...` a call at a time through this
    server, started at the first call with `env`; each call's output passes
    through two files in `tmp`. run() gives a CompletedProcess, as
    subprocess.run(..., capture_output=True, text=True) would."""

    def __init__(self, python, env, tmp, cwd=None):
        self.python, self.env, self.tmp, self.cwd, self.proc, self.n = python, env, tmp, cwd, None, 0

    def run(self, argv):
        if self.proc is None:
            self.proc = subprocess.Popen([self.python, os.path.abspath(__file__)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=self.env,
                                         cwd=self.cwd)
        self.n += 1
        out, err = (os.path.join(self.tmp, "record%d.%s" % (self.n, k)) for k in ("out", "err"))
        self.proc.stdin.write(json.dumps({"argv": argv, "stdout": out, "stderr": err}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("fork_recorder.py exited (code %s) before answering" % self.proc.wait())
        texts = []
        for path in (out, err):  # absent when the child failed before opening them
            if os.path.exists(path):
                with open(path) as f:
                    texts.append(f.read())
                os.unlink(path)
            else:
                texts.append("")
        return subprocess.CompletedProcess(argv, json.loads(line)["rc"], texts[0], texts[1])

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait()


def serve():
    import torch  # noqa: F401
    for name in ("transformers", "timm"):
        try:
            __import__(name)
        except ImportError:
            pass
    import gpusim_torch.cli  # noqa: F401
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        out.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(req)
        _, status = os.waitpid(pid, 0)
        out.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve())
