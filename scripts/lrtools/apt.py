"""Another Debian release's (or architecture's) packages through a private
package list: apt reads a sources list, lists directory and archive cache of
its own, resolves against an empty status file, and nothing on the machine
changes. Packages are downloaded, never installed; callers unpack them."""
import glob
import os
import shutil
import subprocess
import time

from .common import Fail, run


class PrivateApt:
    """apt over `base` (a cache directory) for `release` ("bullseye", "sid",
    None for the machine's own release and lists). `arches` are the package
    architectures (the first is the default one)."""

    def __init__(self, base, release=None, arches=None):
        self.base = base
        self.release = release
        self.opts = []
        if release:
            for d in ("lists/partial", "cache/archives/partial", "archives/partial"):
                os.makedirs(os.path.join(base, d), exist_ok=True)
            with open(os.path.join(base, "sources.list"), "w") as f:
                f.write(f"deb http://deb.debian.org/debian {release} main\n")
            self.opts = [
                "-o", f"Dir::Etc::SourceList={base}/sources.list",
                "-o", "Dir::Etc::SourceParts=/dev/null",
                "-o", f"Dir::State::Lists={base}/lists",
                "-o", f"Dir::Cache={base}/cache",
                "-o", f"Dir::Cache::archives={base}/archives",
                "-o", "Dir::State::status=/dev/null",
                "-o", "Debug::NoLocking=1",
                "-o", "APT::Sandbox::User=root",
                "-o", "APT::Install-Recommends=0",
            ]
        if arches:
            self.opts += ["-o", f"APT::Architecture={arches[0]}"]
            self.opts += ["-o", "APT::Architectures::=" + arches[0]]
            for a in arches[1:]:
                self.opts += ["-o", "APT::Architectures::=" + a]

    def update(self, max_age=None, required=False):
        """Refreshes the lists (only when older than max_age seconds, if given);
        a failure keeps the cached lists unless `required`."""
        if not self.release:
            return
        lists = glob.glob(os.path.join(self.base, "lists", "*Packages*"))
        if max_age and lists and time.time() - max(map(os.path.getmtime, lists)) < max_age:
            return
        r = subprocess.run(["apt-get", *self.opts, "update", "-qq"], stdout=subprocess.DEVNULL)
        if r.returncode != 0:
            if required or not lists:
                raise Fail(f"apt-get update of {self.release} failed")

    def _cache(self, *args):
        r = subprocess.run(["apt-cache", *self.opts, *args], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        return r.stdout if r.returncode == 0 else ""

    def depends(self, pkg):
        """The packages `pkg` depends on, in the order apt-cache lists them."""
        out = []
        for line in self._cache("depends", pkg).splitlines():
            line = line.strip()
            if line.startswith("Depends:"):
                out.append(line.split()[1])
        return out

    def version(self, pkg):
        """The newest version the lists offer ('' when none)."""
        for line in self._cache("show", pkg).splitlines():
            if line.startswith("Version:"):
                return line.split()[1]
        return ""

    def candidate(self, pkg):
        """apt-cache policy's candidate ('' when none)."""
        for line in self._cache("policy", pkg).splitlines():
            line = line.strip()
            if line.startswith("Candidate:"):
                v = line.split()[1]
                return "" if v == "(none)" else v
        return ""

    def download(self, pkgs, into, check=True):
        """Downloads `pkgs` (names, NAME=VERSION or NAME:ARCH) into `into`.

        apt-get writes each package in place, so an interrupted run (a killed
        session, a full disk) would leave a truncated .deb that the next run
        takes for a cached one. Packages land in a private folder first and
        only whole ones are moved into `into`."""
        os.makedirs(into, exist_ok=True)
        part = os.path.join(into, f".partial-{os.getpid()}")
        shutil.rmtree(part, ignore_errors=True)
        os.makedirs(part)
        try:
            r = subprocess.run(["apt-get", *self.opts, "download", "-q", *pkgs], cwd=part,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            # A failed run may leave a half-written package: keep none of it.
            for f in os.listdir(part) if r.returncode == 0 else []:
                if f.endswith(".deb"):
                    os.replace(os.path.join(part, f), os.path.join(into, f))
        finally:
            shutil.rmtree(part, ignore_errors=True)
        if r.returncode != 0 and check:
            err = "\n".join(l for l in r.stderr.splitlines() if "unsandboxed" not in l)
            raise Fail(f"downloading {' '.join(pkgs)} failed: {err[-500:]}")
        return r.returncode == 0

    def fetch_with_depends(self, pkgs):
        """Downloads `pkgs` and everything they depend on (resolved against an
        empty system) into the archive cache; returns the .deb paths. False
        when the release cannot give them now."""
        arch = os.path.join(self.base, "archives")
        for f in glob.glob(os.path.join(arch, "*.deb")):
            os.unlink(f)
        r = run(["apt-get", *self.opts, "install", "--download-only", "-y", "-qq", *pkgs],
                check=False)
        if r.returncode != 0:
            return False
        return sorted(glob.glob(os.path.join(arch, "*.deb")))

    def clean_archives(self):
        for f in glob.glob(os.path.join(self.base, "archives", "*.deb")):
            os.unlink(f)


def deb_members(deb):
    """The paths a package holds (dpkg-deb -c), as ./path."""
    out = subprocess.run(["dpkg-deb", "-c", deb], stdout=subprocess.PIPE, text=True,
                         check=True).stdout
    return [line.split()[-1] if " -> " not in line else line.split(" -> ")[0].split()[-1]
            for line in out.splitlines()]


def fsys_tar(deb):
    """A package's data member as a tar stream (a Popen whose stdout reads
    it); xz with both cores when it is xz (a 1.2 GB -dbg package)."""
    members = subprocess.run(["ar", "t", deb], stdout=subprocess.PIPE, text=True).stdout.split()
    if "data.tar.xz" in members:
        ar = subprocess.Popen(["ar", "p", deb, "data.tar.xz"], stdout=subprocess.PIPE)
        xz = subprocess.Popen(["xz", "-dc", "-T2"], stdin=ar.stdout, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
        ar.stdout.close()
        return xz
    return subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb], stdout=subprocess.PIPE)


def extract(deb, dest, members=(), first_only=False):
    """Unpacks `members` of `deb` (all when none) under `dest`; with
    first_only, tar stops at the first occurrence (a member early in a big
    package)."""
    os.makedirs(dest, exist_ok=True)
    src = fsys_tar(deb)
    cmd = ["tar", "-x", "-C", dest] + (["--occurrence=1"] if first_only else []) + list(members)
    tar = subprocess.run(cmd, stdin=src.stdout, stderr=subprocess.DEVNULL)
    src.stdout.close()
    src.wait()
    return tar.returncode == 0


def unpack(deb, dest):
    """dpkg-deb -x: the whole package under dest."""
    run(["dpkg-deb", "-x", deb, dest])
