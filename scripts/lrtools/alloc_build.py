"""Allocators built from Debian's own source with their DWARF, which Debian's
stripped packages leave out (their -dbgsym are on debug.debian.org, which CI
does not reach). leakref-debsrc fetches each installed package's orig
tarball; the tests preload the built library into their fixtures.

jemalloc: the jemalloc of the installed libjemalloc2 with Debian's configure
options for amd64 (debian/rules: --with-lg-page=12 --with-lg-hugepage=21
--enable-prof) and its compiler flags. LG_VADDR, when given, is the address
width it is built for (configure takes it from the build machine's CPU
otherwise: 48, or 57 on one that reports five-level paging), which decides the
shape of its extent map; nostats, after it, builds it without statistics
(--disable-stats): its arenas then list no thread cache, which the walk must
say. Prints VERSION ("5.3.0-0-g54eaed1d..."), LIB (the unstripped
libjemalloc.so.2) and LG_VADDR.

tcmalloc: the tcmalloc of the installed libgoogle-perftools4 (its orig tarball
has CMake files but no configure script) as libtcmalloc_minimal. Prints
VERSION ("2.10") and LIB.

usage: scripts/jemalloc-build [LG_VADDR [nostats]]
       scripts/tcmalloc-build
env: LEAKREF_JCACHE (default /var/cache/leakref/jemalloc),
     LEAKREF_TCCACHE (default /var/cache/leakref/tcmalloc)
"""
import glob
import os
import re
import shutil
import subprocess

from .common import Fail, SOURCE, cache_dir, locked, logger, output, print_kv, rmtree

JEMALLOC_FLAGS = dict(CFLAGS="-g -O2 -fstack-protector-strong -Wformat -Werror=format-security",
                      CPPFLAGS="-Wdate-time -D_FORTIFY_SOURCE=2", LDFLAGS="-Wl,-z,relro")


def debian_source(cache, package):
    src = output([os.path.join(SOURCE, "scripts/leakref-debsrc"), "--cache", cache, package],
                 check=False).strip()
    if not src:
        raise Fail(f"no source for {package}")
    return src


def build_once(out, build, log, what):
    """Builds into OUT.tmp with build(dir) and moves it to `out` once whole."""
    if os.path.isfile(os.path.join(out, ".complete")):
        return
    with locked(out + ".lock"):
        if os.path.isfile(os.path.join(out, ".complete")):
            return
        tmp = out + ".tmp"
        rmtree(tmp)
        log(f"building {what} in {tmp}")
        if not build(tmp):
            raise Fail(f"the build failed; see {tmp}/configure.log and make.log")
        open(os.path.join(tmp, ".complete"), "w").close()
        rmtree(out)
        os.rename(tmp, out)


def source_build(tool, argv, env, default, package):
    """A build of installed PACKAGE's Debian source that takes no arguments:
    its logger, source directory, upstream version and build directory."""
    if argv:
        raise Fail(f"usage: {tool}", 2)
    c = cache_dir(env, default)
    src = debian_source(c, package)
    return (logger(tool), src, src.rsplit("-", 1)[-1],
            os.path.join(c, "build-" + os.path.basename(src)))


def logged(cmd, cwd, log_name, env=None):
    with open(os.path.join(cwd, log_name), "a") as f:
        return subprocess.run(cmd, cwd=cwd, stdout=f, stderr=f, env=env).returncode == 0


def jemalloc(argv):
    log = logger("jemalloc-build")
    vaddr = argv[0] if argv else ""
    stats = argv[1] if len(argv) > 1 else ""
    if vaddr not in ("", "48", "57"):
        raise Fail("LG_VADDR must be 48 or 57", 2)
    if stats not in ("", "nostats"):
        raise Fail("the second argument is nostats or nothing", 2)
    c = cache_dir("LEAKREF_JCACHE", "/var/cache/leakref/jemalloc")
    src = debian_source(c, "libjemalloc2")
    with open(os.path.join(src, "VERSION")) as f:
        ver = f.read().strip()
    out = os.path.join(c, "build-" + os.path.basename(src) + (f"-vaddr{vaddr}" if vaddr else "") +
                       (f"-{stats}" if stats else ""))

    def build(tmp):
        shutil.copytree(src, tmp, symlinks=True)
        conf = ["./configure", "--prefix=/usr", "--libdir=/usr/lib/x86_64-linux-gnu",
                f"--with-version={ver}", "--with-lg-page=12", "--with-lg-hugepage=21",
                "--enable-prof", "--disable-doc"]
        conf += [f"--with-lg-vaddr={vaddr}"] if vaddr else []
        conf += ["--disable-stats"] if stats else []
        env = dict(os.environ, **JEMALLOC_FLAGS)
        return (logged(conf, tmp, "configure.log", env) and
                logged(["make", f"-j{os.cpu_count()}", "lib/libjemalloc.so.2"], tmp, "make.log"))

    build_once(out, build, log, f"jemalloc {ver}")
    with open(os.path.join(out, "include/jemalloc/internal/jemalloc_internal_defs.h")) as f:
        m = re.search(r"^#define LG_VADDR (\S+)", f.read(), re.M)
    print_kv([("VERSION", ver), ("LIB", os.path.join(out, "lib/libjemalloc.so.2")),
              ("LG_VADDR", m.group(1) if m else "")])
    return 0


def tcmalloc(argv):
    log, src, ver, out = source_build("tcmalloc-build", argv, "LEAKREF_TCCACHE",
                                      "/var/cache/leakref/tcmalloc", "libgoogle-perftools4")

    def build(tmp):
        os.makedirs(tmp)
        return (logged(["cmake", "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DGPERFTOOLS_BUILD_STATIC=OFF",
                        "-Dgperftools_build_minimal=ON", "-DBUILD_TESTING=OFF", src], tmp,
                       "configure.log") and
                logged(["make", f"-j{os.cpu_count()}", "tcmalloc_minimal"], tmp, "make.log"))

    build_once(out, build, log, f"gperftools {ver}")
    libs = sorted(glob.glob(os.path.join(out, "libtcmalloc_minimal.so.*.*")))
    if not libs:
        raise Fail(f"{out} holds no libtcmalloc_minimal.so")
    print_kv([("VERSION", ver), ("LIB", libs[0])])
    return 0
