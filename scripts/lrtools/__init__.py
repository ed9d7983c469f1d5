"""leakref's provisioning tools: what downloads, builds and boots the things the
tests and benches run against (Debian kernels under QEMU, other releases' glibc
and packages, allocators built from Debian source), and the benches themselves.

Each tool is a module with a main(argv); scripts/<tool> is a small launcher that
runs it, so callers keep the paths they know. What every tool shares lives in
common.py (logging, commands, cache locks and keys) and apt.py (another Debian
release's or architecture's packages through a private package list: the
machine's own sources are never touched).
"""
