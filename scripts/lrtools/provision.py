"""Fills the caches the tests read, ahead of them: every kernel's guest dumps,
the kmemleak kernel, the allocators built from Debian's source, the other
releases' glibc, the tree of sid's packages crash 9 runs in, and Debian 13's
python3.13 with its debug info. make test
runs it while leakref builds, so a fresh machine downloads and boots while it
compiles, and the test shards find everything made.

Each step is the tool a test runs itself (a test that finds the cache empty
still makes what it needs: this only moves the waiting). Downloads run side
by side; what keeps a core busy (a guest under TCG, a compiler) runs one at a
time, in the order the test shards first need them. A step that fails is
said, with its tool's last lines, and the run goes on: the test that needs it
fails with the same message.

usage: scripts/provision [--list] [STEP...]
  --list   the steps, one a line
  STEP     only these (default: all)
Prints one line per step with its time, when it began and the CPU it used;
exits 1 when one failed.
"""
import concurrent.futures
import os
import subprocess
import sys
import tempfile
import threading
import time

from .common import SOURCE, Fail

S = os.path.join(SOURCE, "scripts")
SID_CRASH = ["crash-sid", "sid", "crash", "libdw1t64", "libelf1t64", "libdebuginfod1t64", "libzstd1",
             "liblzma5", "liblz4-1", "zlib1g", "libstdc++6", "libaddrxlat3"]
# (name, command, kind): "net" steps mostly wait on the archive and run side
# by side; "cpu" steps keep a core busy and run one after another.
STEPS = [
    ("kernel-fetch-6.1", [f"{S}/kernel-vmcore", "--kernel", "6.1", "--fetch-only"], "net"),
    ("kernel-fetch-6.12", [f"{S}/kernel-vmcore", "--kernel", "6.12", "--fetch-only"], "net"),
    ("kernel-fetch-5.10", [f"{S}/kernel-vmcore", "--kernel", "5.10", "--fetch-only"], "net"),
    ("kernel-fetch-7.x", [f"{S}/kernel-vmcore", "--kernel", "7.x", "--fetch-only"], "net"),
    ("kernel-fetch-arm64", [f"{S}/kernel-vmcore", "--kernel", "arm64", "--fetch-only"], "net"),
    ("glibc-bullseye", [f"{S}/glibc-release", "bullseye"], "net"),
    ("glibc-trixie", [f"{S}/glibc-release", "trixie"], "net"),
    ("glibc-sid", [f"{S}/glibc-release", "sid"], "net"),
    ("glibc-experimental", [f"{S}/glibc-release", "experimental"], "net"),
    ("glibc-arm64", [f"{S}/glibc-release", "bookworm", "arm64"], "net"),
    ("crash-sid", [f"{S}/debian-root", *SID_CRASH], "net"),
    ("python3.13", [f"{S}/debian-root", "py313", "trixie", "python3.13", "python3.13-dbg",
                    "libc6-dbg"], "net"),
    ("guest-6.1", [f"{S}/kernel-vmcore", "--kernel", "6.1"], "cpu"),
    ("guest-6.12", [f"{S}/kernel-vmcore", "--kernel", "6.12"], "cpu"),
    ("guest-5.10", [f"{S}/kernel-vmcore", "--kernel", "5.10"], "cpu"),
    ("guest-7.x", [f"{S}/kernel-vmcore", "--kernel", "7.x"], "cpu"),
    ("guest-arm64", [f"{S}/kernel-vmcore", "--kernel", "arm64"], "cpu"),
    ("kmemleak", [f"{S}/kernel-kmemleak"], "cpu"),
    ("jemalloc-48", [f"{S}/jemalloc-build", "48"], "cpu"),
    ("jemalloc-57", [f"{S}/jemalloc-build", "57"], "cpu"),
    ("jemalloc-nostats", [f"{S}/jemalloc-build", "48", "nostats"], "cpu"),
    ("tcmalloc", [f"{S}/tcmalloc-build"], "cpu"),
    ("mosh", [f"{S}/mosh-build"], "cpu"),
]
# A guest needs its kernel fetched first.
AFTER = {f"guest-{k}": f"kernel-fetch-{k}" for k in ("6.1", "6.12", "5.10", "7.x", "arm64")}

_print = threading.Lock()


def say(line):
    with _print:
        print(line, flush=True)


def timed(cmd):
    """Runs cmd; its status, stderr, and the CPU seconds it and its children
    used (os.wait4: the figure that says what a step costs a 2-core CI
    machine, where wall time only says how long it waited)."""
    with tempfile.TemporaryFile(mode="w+") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, text=True)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return p.returncode, err.read(), ru.ru_utime + ru.ru_stime


def run_step(name, cmd, done, t_start):
    if name in AFTER and AFTER[name] in done:
        done[AFTER[name]].result()
    t0 = time.monotonic()
    rc, err, cpu = timed(cmd)
    secs = time.monotonic() - t0
    when = f"begun at +{t0 - t_start:.0f} s, {cpu:.0f} s of CPU"
    if rc != 0:
        tail = "\n    ".join(err.strip().splitlines()[-5:])
        say(f"provision: {name}: FAILED after {secs:.0f} s ({when})\n    {tail}")
        return False
    say(f"provision: {name}: {secs:.0f} s ({when})")
    return True


def main(argv):
    if argv[:1] == ["--list"]:
        for name, cmd, kind in STEPS:
            print(f"{name}\t{kind}\t{' '.join(os.path.relpath(c, SOURCE) if c.startswith(S) else c for c in cmd)}")
        return 0
    unknown = [a for a in argv if a not in {n for n, _, _ in STEPS}]
    if unknown:
        raise Fail(f"no step {unknown[0]} (--list names them)", 2)
    steps = [s for s in STEPS if not argv or s[0] in argv]
    t0 = time.monotonic()
    done = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as net, \
            concurrent.futures.ThreadPoolExecutor(max_workers=1) as cpu:
        for name, cmd, kind in steps:
            done[name] = (net if kind == "net" else cpu).submit(run_step, name, cmd, done, t0)
        ok = all(f.result() for f in done.values())
    say(f"provision: {len(steps)} steps in {time.monotonic() - t0:.0f} s"
        + ("" if ok else " (some failed: their tests will say why)"))
    return 0 if ok else 1
