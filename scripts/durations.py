#!/usr/bin/env python3
"""Writes tests/durations.txt's lines ("SECONDS<TAB>TEST CASE") from the
durations a whole run printed (leakref-tests -d yes, on stdin): the shards of
make test are balanced by them.

usage: leakref-tests -d yes | scripts/durations.py LEAKREF-TESTS > tests/durations.txt
Catch prints a line per section too; only the test cases' lines (their names
from LEAKREF-TESTS --list-test-names-only) are kept.
"""
import re
import subprocess
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    names = set(subprocess.run([sys.argv[1], "--list-test-names-only"], stdout=subprocess.PIPE,
                               text=True).stdout.splitlines())
    secs = {}
    for line in sys.stdin:
        m = re.match(r"^(\d+\.\d+) s: (.*)$", line.rstrip("\n"))
        if m and m.group(2) in names:
            # One line per run of the test case (a run per leaf section).
            secs[m.group(2)] = secs.get(m.group(2), 0.0) + float(m.group(1))
    print("# Each test case's seconds in one whole run (make test-durations; the")
    print("# sanitized suite's: make test-sanitize-durations), for the balance of the")
    print("# shards; a test case not listed counts its plain seconds, else 10 s.")
    for name, s in sorted(secs.items(), key=lambda x: (-x[1], x[0])):
        print(f"{s:.1f}\t{name}")


if __name__ == "__main__":
    main()
