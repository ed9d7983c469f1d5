"""Another Debian release's glibc (libc6, libc6-dbg, and libc6-dev to link
against it) in a cache, for the tests that walk heaps of programs running on
it. Nothing on the machine changes: apt reads a private package list
(lrtools.apt), and the packages are unpacked (dpkg -x) under the cache, their
absolute symlinks made relative so the tree works where it lies.

Prints KEY=VALUE lines:
  VERSION  the libc's release ("2.31")
  ROOT     the unpacked tree
  LD       its dynamic loader (a program linked with --dynamic-linker=LD and
           -rpath LIBDIR runs on this libc)
  LIBDIR   the directory of its libc.so.6
  DEBUG    its /usr/lib/debug (--debug-dir)
  CFLAGS   gcc flags that build a C program against it (older releases: their
           own crt files and libc_nonshared through --sysroot)
With arm64, the tree is a sysroot for qemu-aarch64 (libc6, libc6-dbg,
libstdc++6 and libgcc-s1 of arm64) and the lines are VERSION, ROOT, DEBUG,
LIBDIR and RUN (the command that runs a program built by Debian's
aarch64-linux-gnu-gcc on it).

usage: scripts/glibc-release bullseye|bookworm|trixie|sid|experimental [amd64|arm64]
env: LEAKREF_GCACHE (default /var/cache/leakref/glibc)
"""
import glob
import os
import re

from .apt import PrivateApt, unpack
from .common import Fail, cache_dir, locked, logger, print_kv, rmtree

log = logger("glibc-release")
RELEASES = {"bullseye", "bookworm", "trixie", "sid", "experimental"}


def relative_links(root):
    """Absolute links (lib64/ld-linux-x86-64.so.2 -> /lib/...) point at the
    host's files; make them point inside the tree."""
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            if os.path.islink(p) and os.readlink(p).startswith("/"):
                # As realpath -m --relative-to: both ends canonical.
                target = os.path.realpath(root + os.readlink(p))
                os.unlink(p)
                os.symlink(os.path.relpath(target, os.path.realpath(d)), p)


def fetch(c, rel, arch, d):
    tag = os.path.basename(d)
    apt = PrivateApt(os.path.join(c, "apt", tag), rel, [arch])
    apt.update(required=True)
    v = apt.version("libc6")
    if not v:
        raise Fail(f"no libc6 in {rel}'s package lists")
    if arch == "amd64":
        pkgs = [f"libc6={v}", f"libc6-dbg={v}", f"libc6-dev={v}"]
    else:
        pkgs = [f"libc6:{arch}={v}", f"libc6-dbg:{arch}={v}", f"libstdc++6:{arch}", f"libgcc-s1:{arch}"]
    debs = os.path.join(c, "apt", tag, "debs")
    rmtree(debs)
    tmp = d + ".tmp"
    rmtree(tmp)
    try:
        apt.download(pkgs, debs)
    except Fail:
        raise Fail(f"downloading libc6 {v} of {rel} ({arch}) failed")
    os.makedirs(tmp)
    for f in sorted(glob.glob(os.path.join(debs, "*.deb"))):
        unpack(f, tmp)
    relative_links(tmp)
    # Merged-/usr releases ship /usr/lib64 only; their libc.so script names
    # /lib64/... and /lib/... (the links usrmerge makes on a real system).
    for l in ("lib", "lib64"):
        if not os.path.lexists(os.path.join(tmp, l)) and os.path.isdir(os.path.join(tmp, "usr", l)):
            os.symlink("usr/" + l, os.path.join(tmp, l))
    with open(os.path.join(tmp, ".leakref-version"), "w") as f:
        f.write(v + "\n")
    rmtree(d)
    os.rename(tmp, d)
    rmtree(debs)


def first(*paths):
    return next((p for p in paths if os.path.exists(p)), "")


def release_of(libc):
    with open(libc, "rb") as f:
        m = re.search(rb"release version ([0-9]+\.[0-9]+)", f.read())
    return m.group(1).decode() if m else ""


def main(argv):
    rel = argv[0] if argv else ""
    arch = argv[1] if len(argv) > 1 else "amd64"
    if rel not in RELEASES or arch not in ("amd64", "arm64") or (arch == "arm64" and rel != "bookworm"):
        raise Fail("usage: glibc-release bullseye|bookworm|trixie|sid|experimental [amd64], "
                   "or bookworm arm64", 2)
    c = cache_dir("LEAKREF_GCACHE", "/var/cache/leakref/glibc")
    d = os.path.join(c, rel if arch == "amd64" else f"{rel}-{arch}")
    with locked(d + ".lock"):
        if not os.path.isfile(os.path.join(d, ".leakref-version")):
            fetch(c, rel, arch, d)
    if arch == "arm64":
        libc = first(f"{d}/lib/aarch64-linux-gnu/libc.so.6", f"{d}/usr/lib/aarch64-linux-gnu/libc.so.6")
        if not os.path.exists(f"{d}/lib/ld-linux-aarch64.so.1") or not libc:
            raise Fail(f"{d} holds no aarch64 loader or libc.so.6")
        print_kv([("VERSION", release_of(libc)), ("ROOT", d), ("DEBUG", f"{d}/usr/lib/debug"),
                  ("LIBDIR", os.path.dirname(libc)), ("RUN", f"qemu-aarch64 -L {d}")])
        return 0
    ld = first(f"{d}/lib64/ld-linux-x86-64.so.2", f"{d}/usr/lib64/ld-linux-x86-64.so.2")
    libc = first(f"{d}/lib/x86_64-linux-gnu/libc.so.6", f"{d}/usr/lib/x86_64-linux-gnu/libc.so.6")
    if not ld or not libc:
        raise Fail(f"{d} holds no loader or libc.so.6")
    libdir = os.path.dirname(libc)
    # A release older than the host's needs its own crt files and
    # libc_nonshared (the host's reference newer symbol versions); a newer one
    # runs the host's binaries as they are.
    print_kv([("VERSION", release_of(libc)), ("ROOT", d), ("LD", ld), ("LIBDIR", libdir),
              ("DEBUG", f"{d}/usr/lib/debug"),
              ("CFLAGS", f"--sysroot={d} -B{d}/usr/lib/x86_64-linux-gnu -Wl,--dynamic-linker={ld} "
                         f"-Wl,-rpath,{libdir}")])
    return 0
