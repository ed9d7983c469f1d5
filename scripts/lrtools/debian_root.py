"""A root tree of another Debian release's packages, to run that release's own
programs here: sid's crash (9.x, which opens the 6.12 and 7.x dumps
bookworm's 8.0.2 cannot) and the compiler and kbuild tools a sid kernel's
modules are built with (gcc-16, and tools linked against glibc 2.38 and later,
which do not run on bookworm's 2.36). Nothing on the machine changes: apt
reads a private package list (lrtools.apt), resolves the packages'
dependencies against an empty status file, and the packages are unpacked
(dpkg-deb -x) into the tree, never installed.

usage: scripts/debian-root NAME RELEASE PKG...
         builds the tree NAME (cached, keyed by RELEASE, PKG... and this tool;
         an older tree of that NAME is removed) and prints ROOT=DIR
       scripts/debian-root --in DIR [--bind PATH]... [--bind-rw PATH]... CMD...
         runs CMD chrooted in DIR, with /proc mounted and each PATH (a host
         directory or file) at the same path inside, read-only unless
         --bind-rw. The mounts live in a private mount namespace and vanish
         with CMD. Needs root (CI is root).
       scripts/debian-root --libs-beside DIR FILE
         copies beside FILE (a library built here, with RUNPATH $ORIGIN) this
         machine's copy of each library it needs that the tree lacks (by
         soname, as the tree's own loader resolves it), and names them
env: LEAKREF_RCACHE (default /var/cache/leakref/roots)
"""
import glob
import os
import shutil
import subprocess
import sys
import time

from .apt import PrivateApt, unpack
from .common import Fail, cache_dir, key_of, locked, logger, print_kv, rmtree

log = logger("debian-root")
# What a build or a script inside needs, beside what was asked.
ESSENTIAL = ["base-files", "bash", "dash", "coreutils", "sed", "grep", "mawk", "findutils",
             "diffutils", "tar", "gzip", "xz-utils"]
# The mounts are made by a child shell inside the new namespace; its
# arguments carry the lists so no quoting is needed.
IN_NAMESPACE = r'''
root="$1"; nb="$2"; nrw="$3"; shift 3
mount -t proc proc "$root/proc"
for ((i = 0; i < nb + nrw; i++)); do
  p="$1"; shift
  if [ -d "$p" ]; then mkdir -p "$root$p"; else mkdir -p "$(dirname "$root$p")"; touch "$root$p"; fi
  mount --bind "$p" "$root$p"
  [ "$i" -ge "$nb" ] || mount -o remount,bind,ro "$root$p"
done
exec chroot "$root" "$@"'''


def run_in(root, cmd, binds=(), binds_rw=(), **kw):
    """Runs cmd chrooted in `root`; its status."""
    if not cmd:
        raise Fail("--in DIR needs a command", 2)
    if not os.access(os.path.join(root, "usr/bin/env"), os.X_OK):
        raise Fail(f"{root} is not a tree this tool built", 2)
    argv = ["unshare", "--mount", "--propagation", "private", "--fork", "bash", "-euc",
            IN_NAMESPACE, "run_in", root, str(len(binds)), str(len(binds_rw)), *binds, *binds_rw,
            *cmd]
    return subprocess.run(argv, **kw).returncode


def older_tree(c, name):
    """The newest complete tree of `name` another key built (its packages are
    older, or another set); None when there is none."""
    trees = [t for t in glob.glob(os.path.join(c, name + "-*"))
             if not t.endswith(".tmp") and os.path.exists(os.path.join(t, ".complete"))]
    if not trees:
        return None
    t = max(trees, key=lambda p: os.path.getmtime(os.path.join(p, ".complete")))
    log(f"using the older tree {t} instead")
    return t


def finish_tree(tmp):
    """What maintainer scripts would have made: awk's alternative and
    /dev/null, /proc and /tmp to mount and write on."""
    awk = os.path.join(tmp, "usr/bin/awk")
    if not os.path.lexists(awk):
        os.symlink("mawk", awk)
    for d in ("dev", "proc", "tmp"):
        os.makedirs(os.path.join(tmp, d), exist_ok=True)
    os.chmod(os.path.join(tmp, "tmp"), 0o1777)
    null = os.path.join(tmp, "dev/null")
    if os.path.lexists(null):
        os.unlink(null)
    os.mknod(null, 0o666 | 0o020000, os.makedev(1, 3))
    os.chmod(null, 0o666)


def tree(name, release, pkgs):
    """The tree NAME of `release`'s `pkgs` (built when missing); its path."""
    if not pkgs:
        raise Fail("usage: debian-root NAME RELEASE PKG...", 2)
    c = cache_dir("LEAKREF_RCACHE", "/var/cache/leakref/roots")
    # The tool's content, not its path: clones elsewhere share the tree.
    key = key_of(release, *pkgs, files=["scripts/lrtools/debian_root.py", "scripts/lrtools/apt.py"],
                 length=12)
    d = os.path.join(c, f"{name}-{key}")
    if os.path.exists(os.path.join(d, ".complete")):
        return d
    with locked(os.path.join(c, ".lock")):
        if os.path.exists(os.path.join(d, ".complete")):
            return d
        apt = PrivateApt(os.path.join(c, "apt-" + release), release)
        apt.update()
        # A second try for a download cut off; if the release cannot give them
        # now (a sid transition, the archive out of reach), an older tree of
        # this name, if there is one, is used and named.
        debs = False
        for attempt in (1, 2):
            debs = apt.fetch_with_depends(ESSENTIAL + list(pkgs))
            if debs:
                break
            if attempt == 1:
                time.sleep(5)
        if not debs:
            log(f"resolving or downloading {' '.join(pkgs)} from {release} failed")
            old = older_tree(c, name)
            if old:
                return old
            raise Fail(f"no tree of {release}'s {' '.join(pkgs)}")
        tmp = d + ".tmp"
        rmtree(tmp)
        os.makedirs(tmp)
        for f in debs:
            unpack(f, tmp)
        apt.clean_archives()
        finish_tree(tmp)
        # Older trees of this name (other package sets or versions) go.
        for old in glob.glob(os.path.join(c, name + "-*")):
            if old not in (d, tmp):
                rmtree(old)
        open(os.path.join(tmp, ".complete"), "w").close()
        os.rename(tmp, d)
    return d


def libs_beside(root, file):
    """Copies beside `file` each library its loader in `root` cannot find,
    from this machine, until none is missing."""
    file = os.path.realpath(file)
    d = os.path.dirname(file)
    for _ in range(8):
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "--fork", "bash",
                            "-euc", IN_NAMESPACE, "run_in", root, "1", "0", d, "/usr/bin/env",
                            "LD_TRACE_LOADED_OBJECTS=1", "/usr/lib64/ld-linux-x86-64.so.2", file],
                           stdout=subprocess.PIPE, text=True)
        missing = [f[0] for f in (l.split() for l in r.stdout.splitlines())
                   if len(f) >= 3 and f[1] == "=>" and f[2] == "not"]
        if not missing:
            return
        cache = subprocess.run(["ldconfig", "-p"], stdout=subprocess.PIPE, text=True).stdout
        for so in missing:
            path = next((l.split()[-1] for l in cache.splitlines()
                         if l.split() and l.split()[0] == so and "x86-64" in l), None)
            if not path:
                raise Fail(f"{so}: needed by {file}, in neither {root} nor this machine")
            shutil.copy(os.path.realpath(path), os.path.join(d, os.path.basename(path)))
            log(f"beside {os.path.basename(file)}: {so} (this machine's; {root} has none)")
    raise Fail(f"{file}: its libraries still not all found after 8 rounds")


def main(argv):
    if argv[:1] == ["--libs-beside"]:
        if len(argv) != 3:
            raise Fail("usage: debian-root --libs-beside DIR FILE", 2)
        libs_beside(argv[1], argv[2])
        return 0
    if argv[:1] == ["--in"]:
        if len(argv) < 2:
            raise Fail("usage: debian-root --in DIR CMD...", 2)
        root, rest, binds, rw = argv[1], argv[2:], [], []
        while len(rest) >= 2 and rest[0] in ("--bind", "--bind-rw"):
            (binds if rest[0] == "--bind" else rw).append(rest[1])
            rest = rest[2:]
        sys.stdout.flush()
        return run_in(root, rest, binds, rw)
    if not argv or argv[0].startswith("-") or len(argv) < 3:
        raise Fail("usage: debian-root NAME RELEASE PKG... | --in DIR [--bind P]... "
                   "[--bind-rw P]... CMD...", 2)
    print_kv([("ROOT", tree(argv[0], argv[1], argv[2:]))])
    return 0
