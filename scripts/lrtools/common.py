"""What every provisioning tool shares: messages, commands, caches."""
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time

SOURCE = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))


class Fail(Exception):
    """A tool's failure: its message, and the exit status it ends with."""

    def __init__(self, message, status=3):
        super().__init__(message)
        self.status = status


def logger(tool):
    """log(msg): 'TOOL: msg' on stderr, where the tools' callers read it."""

    def log(msg):
        print(f"{tool}: {msg}", file=sys.stderr, flush=True)

    return log


def run_main(tool, main, argv):
    """Runs main(argv); a Fail becomes its message on stderr and its status."""
    try:
        return main(argv) or 0
    except Fail as e:
        print(f"{tool}: {e}", file=sys.stderr, flush=True)
        return e.status
    except KeyboardInterrupt:
        return 130


def run(cmd, check=True, quiet=False, **kw):
    """Runs cmd (a list); its output goes to stderr unless captured. Raises
    Fail naming the command when it fails and `check`."""
    if quiet and "stdout" not in kw:
        kw["stdout"] = subprocess.DEVNULL
    if "stdout" not in kw and "capture_output" not in kw:
        kw["stdout"] = sys.stderr
    r = subprocess.run(cmd, **kw)
    if check and r.returncode != 0:
        raise Fail(f"{' '.join(map(str, cmd))} failed (status {r.returncode})")
    return r


def output(cmd, check=True, **kw):
    """The standard output of cmd as text ('' when it fails and not check)."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, **kw)
    if check and r.returncode != 0:
        raise Fail(f"{' '.join(map(str, cmd))} failed (status {r.returncode})")
    return r.stdout if r.returncode == 0 else ""


def need_tools(tools, hint="make test-deps installs it"):
    for t in tools:
        if not shutil.which(t):
            raise Fail(f"missing {t} ({hint})")


def cache_dir(env, default):
    d = os.environ.get(env) or default
    os.makedirs(d, exist_ok=True)
    return d


@contextlib.contextmanager
def locked(path):
    """Holds an exclusive lock on `path` (created): one process at a time
    fills a cache entry, and another waits and then finds it made (two test
    shards, two clones)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def key_of(*parts, files=(), length=16):
    """A cache key from text parts and the contents of files (paths relative to
    the source tree are read from there)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode() + b"\n")
    for f in files:
        with open(os.path.join(SOURCE, f), "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()[:length]


def rmtree(path):
    shutil.rmtree(path, ignore_errors=True)


def replace_dir(tmp, final):
    """Puts the finished `tmp` where `final` was, whole or not at all."""
    rmtree(final)
    os.rename(tmp, final)


def wait_until(pred, timeout, step=0.5, alive=None):
    """Polls pred() until it is true or `timeout` s pass; alive() false ends
    the wait early. True when pred() held."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        if alive and not alive():
            return pred()
        time.sleep(step)
    return pred()


def print_kv(pairs):
    """KEY=VALUE lines on stdout, what the tools' callers parse."""
    for k, v in pairs:
        print(f"{k}={v}")
    sys.stdout.flush()
