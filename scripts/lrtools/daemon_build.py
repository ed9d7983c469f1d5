"""A real C++ daemon built from Debian's own source with its DWARF (Debian's
package is stripped; its -dbgsym is on debug.debian.org, which CI does not
reach): mosh-server, from the orig tarball of the installed mosh package
(leakref-debsrc), configured as Debian's build does (dpkg-buildflags'
flags; the client is left out: the tests drive the server with Debian's own
mosh-client).

Why mosh: its live state is C++ through and through -- each terminal
framebuffer is a std::vector<std::shared_ptr<Row>> whose rows are shared,
copy on write, between the current screen and the states in flight
(std::list<TimestampedState<Terminal::Complete>>), each Row a
std::vector<Cell> and each Cell a std::string -- so a real load gives
thousands of control blocks with use counts above one; and it builds in
about a minute of CPU. Prints VERSION ("1.4.0") and SERVER (the unstripped
mosh-server).

usage: scripts/mosh-build
env: LEAKREF_MOSHCACHE (default /var/cache/leakref/mosh)
"""
import os
import shutil

from .alloc_build import build_once, logged, source_build
from .common import Fail, print_kv

# dpkg-buildflags on Debian 12 amd64, less -ffile-prefix-map (its path is
# the build directory's, which moves).
DEBIAN_FLAGS = dict(CFLAGS="-g -O2 -fstack-protector-strong -Wformat -Werror=format-security",
                    CXXFLAGS="-g -O2 -fstack-protector-strong -Wformat -Werror=format-security",
                    CPPFLAGS="-Wdate-time -D_FORTIFY_SOURCE=2", LDFLAGS="-Wl,-z,relro -Wl,-z,now")


def mosh(argv):
    log, src, ver, out = source_build("mosh-build", argv, "LEAKREF_MOSHCACHE",
                                      "/var/cache/leakref/mosh", "mosh")

    def build(tmp):
        shutil.copytree(src, tmp, symlinks=True)
        env = dict(os.environ, **DEBIAN_FLAGS)
        return (logged(["./configure", "--prefix=/usr", "--disable-client", "--disable-completion"],
                       tmp, "configure.log", env) and
                logged(["make", f"-j{os.cpu_count()}"], tmp, "make.log", env))

    build_once(out, build, log, f"mosh {ver}")
    server = os.path.join(out, "src/frontend/mosh-server")
    if not os.access(server, os.X_OK):
        raise Fail(f"{out} holds no mosh-server")
    print_kv([("VERSION", ver), ("SERVER", server)])
    return 0
