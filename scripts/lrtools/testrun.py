"""make test's run: the suite in shards side by side, one a core.

Each shard runs `leakref-tests --shard K/N [TEST_ARGS]` with its own log, and once
all have ended their logs are printed one after the other, the documents every
shard wrote are checked against schemas/ together (every schema used, on a
whole run), and one closing line sums them up.

(make test fills the caches the tests read while leakref builds, with
scripts/provision, before it runs this.)

usage: scripts/run-tests BUILD [--shards N] [-- TEST_ARGS...]
  --shards N   test processes side by side (default: the cores)
"""
import os
import re
import subprocess
import sys
import time

from .common import SOURCE, Fail

SUMMARY = re.compile(r"^tests: (\d+) passed, (\d+) failed, (\d+) skipped", re.M)
FAILED = re.compile(r"^failed test cases:\n((?:  .*\n)+)", re.M)


def parse(argv):
    if not argv:
        raise Fail("usage: run-tests BUILD [--shards N] [-- TEST_ARGS...]", 2)
    o = dict(build=argv[0], shards=os.cpu_count() or 2, test_args=[])
    it = iter(argv[1:])
    for a in it:
        if a == "--shards":
            o["shards"] = max(1, int(next(it)))
        elif a == "--":
            o["test_args"] = list(it)
        else:
            raise Fail(f"unknown argument {a}", 2)
    return o


def run_shards(o):
    build, n = o["build"], o["shards"]
    tests = os.path.join(build, "leakref-tests")
    env = dict(os.environ, LR_KEEP_SPOOL="1")
    procs = []
    t0 = time.monotonic()
    for k in range(1, n + 1):
        log = open(os.path.join(build, f"shard-{k}.log"), "w")
        args = [tests] + ([f"--shard", f"{k}/{n}"] if n > 1 else []) + o["test_args"]
        procs.append((k, subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env), log))
    status = 0
    totals = [0, 0, 0]
    failed = []
    for k, p, log in procs:
        rc = p.wait()
        log.close()
        took = time.monotonic() - t0
        with open(log.name, errors="replace") as f:
            text = f.read()
        print(f"\n==== shard {k}/{n} (status {rc}, ended after {took:.0f} s) ====", flush=True)
        sys.stdout.write(text)
        m = SUMMARY.findall(text)
        for block in FAILED.findall(text):
            failed += [f"shard {k}: {line.strip()}" for line in block.splitlines()]
        if rc and not m:
            failed.append(f"shard {k}: ended with status {rc} before its closing line")
        if m:
            for i, v in enumerate(m[-1]):
                totals[i] += int(v)
        status = status or rc or (0 if m else 1)
    return status, totals, failed


def main(argv):
    o = parse(argv)
    spool = os.path.join(o["build"], "json-spool")
    subprocess.run(["rm", "-rf", spool])
    status, totals, failed = run_shards(o)
    if o["shards"] > 1 and not o["test_args"]:
        # A whole run: every shard's documents together, every schema used.
        rc = subprocess.run([sys.executable, os.path.join(SOURCE, "tests/check_json_schemas.py"), spool,
                             os.path.join(SOURCE, "schemas"), "--require-all"]).returncode
        status = status or rc
        if rc:
            failed.append(f"the JSON schema check (status {rc})")
    closing = (f"tests: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped"
               f" ({o['shards']} shard{'s' if o['shards'] > 1 else ''})")
    # The closing lines again in a file: make test prints it last, after the
    # provisioning log, so that a log cut to its tail still names what failed.
    with open(os.path.join(o["build"], "test-summary.txt"), "w") as f:
        f.write("".join(f"failed: {line}\n" for line in failed) + closing + "\n")
    if failed:
        print("failed:\n" + "".join(f"  {line}\n" for line in failed), end="")
    print(closing, flush=True)
    return status
