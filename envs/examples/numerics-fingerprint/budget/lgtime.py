"""Runs `lockgen ARGS` in this interpreter, logging when the kernel is spawned and when it ends (seconds since start)."""
# ruff: noqa: E402  (subprocess is patched before lockgen is imported)

import subprocess
import sys
import time
import runpy

t0 = time.monotonic()


def log(what):
    print(f"[lgtime {time.monotonic() - t0:6.2f} s] {what}", file=sys.stderr, flush=True)


original = subprocess.Popen.__init__


def init(self, args, *a, **k):
    log(f"spawn {' '.join(map(str, args))[:80]}")
    original(self, args, *a, **k)


subprocess.Popen.__init__ = init
original_wait = subprocess.Popen.wait


def wait(self, *a, **k):
    r = original_wait(self, *a, **k)
    log(f"ended {' '.join(map(str, self.args))[:40]} rc={self.returncode}")
    return r


subprocess.Popen.wait = wait
import atexit

atexit.register(lambda: log("exit"))
log("imported")
sys.argv = ["lockgen", *sys.argv[1:]]
runpy.run_module("lockgen", run_name="__main__")
