"""A kernel with kmemleak (CONFIG_DEBUG_KMEMLEAK) built from Debian 12's kernel
source (linux-source-6.1, from the archive; cached), booted under QEMU (TCG)
with the reference-scan fixture module (fixtures/kernel/lrkleak.c) loaded;
kmemleak scans (fixtures/kernel/init-kmemleak) and guest memory is dumped from
the QEMU monitor: the tests compare leakref's `kernel leaks` on the dump with
kmemleak's own report of the same moment.
  vmcore.pelf   ELF with virtual addresses (dump-guest-memory -p)
  serial.log    LRKLEAK lines (the module's objects) and LEAKREF-KMEMLEAK
                lines (kmemleak's report, whole)
Prints KEY=VALUE lines: KVER, VMLINUX, DIR, PELF, SERIAL, KO_LEAK.

usage: scripts/kernel-kmemleak [--fresh] [--fetch-only]
  --fetch-only  build the kernel, boot nothing (a CI step run while leakref
                builds)
env: LEAKREF_KCACHE (default /var/cache/leakref/kernel): the build
     (kmemleak/build-KEY: source tree, objects, vmlinux) and the dump of the
     current guest (kmemleak/dump-KEY), reused while their inputs are
     unchanged.
"""
import glob
import os
import shutil
import subprocess
import time

from . import qemu
from .apt import PrivateApt
from .common import (Fail, SOURCE, cache_dir, key_of, locked, logger, need_tools, output,
                     print_kv, rmtree, run)

log = logger("kernel-kmemleak")
CONFIG = "fixtures/kernel/kmemleak.config"
GUEST_FILES = ["fixtures/kernel/init-kmemleak", "fixtures/kernel/lrkleak.c",
               "scripts/lrtools/kernel_kmemleak.py", "scripts/lrtools/qemu.py"]


def check_config(src):
    """Every line of the fragment holds in the kernel's .config."""
    with open(os.path.join(src, ".config")) as f:
        have = set(f.read().splitlines())
    with open(os.path.join(SOURCE, CONFIG)) as f:
        for line in f.read().splitlines():
            if line.startswith("CONFIG_") and line not in have:
                raise Fail(f"{CONFIG}: '{line}' does not hold in the kernel's .config")
            if line.startswith("# CONFIG_") and line.endswith(" is not set"):
                opt = line[2:].split()[0]
                if any(h.startswith(opt + "=") for h in have):
                    raise Fail(f"{CONFIG}: {opt} is set in the kernel's .config")


def build_kernel(c, b, ver):
    for old in glob.glob(os.path.join(c, "build-*")):
        if old != b:
            rmtree(old)
    rmtree(b)
    dl = os.path.join(b, "dl")
    os.makedirs(dl)
    log(f"downloading linux-source-6.1 {ver} (~140 MB)")
    PrivateApt(c).download([f"linux-source-6.1={ver}"], dl, check=False)
    debs = glob.glob(os.path.join(dl, "linux-source-6.1_*.deb"))
    if not debs:
        raise Fail("download of linux-source-6.1 failed")
    log("unpacking")
    run(["bash", "-c", 'dpkg-deb --fsys-tarfile "$1" | tar -x -O ./usr/src/linux-source-6.1.tar.xz '
         '| tar -xJ -C "$2"', "unpack", debs[0], b])
    src = os.path.join(b, "src")
    os.rename(os.path.join(b, "linux-source-6.1"), src)
    rmtree(dl)
    log(f"configuring (tinyconfig + {CONFIG})")
    blog = open(os.path.join(b, "build.log"), "w")
    mk = ["make", "-s", "-C", src, "ARCH=x86_64"]
    run(mk + ["tinyconfig"], stdout=blog, stderr=blog)
    run(["scripts/kconfig/merge_config.sh", "-m", ".config", os.path.join(SOURCE, CONFIG)], cwd=src,
        stdout=blog, stderr=blog)
    run(mk + ["olddefconfig"], stdout=blog, stderr=blog)
    check_config(src)
    log("building (about 3 minutes on 2 cores)")
    if subprocess.run(mk + [f"-j{os.cpu_count()}", "bzImage", "modules"], stdout=blog,
                      stderr=blog).returncode != 0:
        blog.close()
        with open(os.path.join(b, "build.log")) as f:
            tail = "\n".join(f.read().splitlines()[-20:])
        raise Fail(f"the kernel build failed:\n{tail}")
    blog.close()
    open(os.path.join(b, "complete"), "w").close()


def kernel_tree(c):
    """The built kernel's build directory (built when missing)."""
    ver = PrivateApt(c).candidate("linux-source-6.1")
    if not ver:
        builds = sorted(glob.glob(os.path.join(c, "build-*")), key=os.path.getmtime)
        if not builds or not os.path.exists(os.path.join(builds[-1], "complete")):
            raise Fail("linux-source-6.1 is not in the archive and no build is cached")
        return builds[-1]
    with open(os.path.join(SOURCE, CONFIG)) as f:
        b = os.path.join(c, "build-" + key_of(ver, f.read(), length=12))
    if not os.path.exists(os.path.join(b, "complete")):
        build_kernel(c, b, ver)
    return b


def guest(c, b, kver, fresh):
    src = os.path.join(b, "src")
    d = os.path.join(c, "dump-" + key_of(b, files=GUEST_FILES))
    if not fresh and os.path.exists(os.path.join(d, "complete")):
        return d
    for old in glob.glob(os.path.join(c, "dump-*")):
        if old != d:
            rmtree(old)
    rmtree(d)
    root, mod = os.path.join(d, "root"), os.path.join(d, "mod")
    for sub in ("bin", "sbin", "usr/bin", "usr/sbin", "dev", "proc", "sys", "tmp", "lib/modules"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    os.makedirs(mod)
    shutil.copy(shutil.which("busybox"), os.path.join(root, "bin/busybox"))
    shutil.copy(os.path.join(SOURCE, "fixtures/kernel/lrkleak.c"), mod)
    with open(os.path.join(mod, "Kbuild"), "w") as f:
        f.write("obj-m := lrkleak.o\n")
    with open(os.path.join(mod, "build.log"), "w") as out:
        rc = subprocess.run(["make", "-s", "-C", src, "ARCH=x86_64", f"M={mod}", "modules"],
                            stdout=out, stderr=out).returncode
    if rc != 0:
        with open(os.path.join(mod, "build.log")) as f:
            tail = "\n".join(f.read().splitlines()[-20:])
        raise Fail(f"building fixtures/kernel/lrkleak.c failed:\n{tail}")
    shutil.copy(os.path.join(mod, "lrkleak.ko"), d)
    shutil.copy(os.path.join(mod, "lrkleak.ko"), os.path.join(root, "lib/modules"))
    rmtree(mod)
    shutil.copy(os.path.join(SOURCE, "fixtures/kernel/init-kmemleak"), os.path.join(root, "init"))
    os.chmod(os.path.join(root, "init"), 0o755)
    run(["bash", "-c", "cd \"$1\" && find . | cpio -o -H newc --owner=0:0 2>/dev/null | gzip -1 > \"$2\"",
         "cpio", root, os.path.join(d, "initramfs.cpio.gz")])
    rmtree(root)
    log(f"booting {kver} under QEMU TCG")
    serial, mon = os.path.join(d, "serial.log"), os.path.join(d, "mon.sock")
    argv = ["qemu-system-x86_64", "-accel", "tcg", "-m", "256M", "-smp", "1", "-display", "none",
            "-no-reboot", "-nodefaults", "-device", "vmcoreinfo",
            "-kernel", os.path.join(src, "arch/x86/boot/bzImage"),
            "-initrd", os.path.join(d, "initramfs.cpio.gz"),
            # fw_cfg at QEMU's x86 I/O ports (0x510: selector, data; 0x514: DMA).
            "-append", "console=ttyS0 panic=-1 quiet slub_debug=U,lrk_obj "
            "qemu_fw_cfg.ioport=0x0c@0x510:0:1:4",
            "-serial", "file:" + serial, "-monitor", f"unix:{mon},server,nowait"]
    with qemu.Guest(argv, serial, log) as g:
        t = g.wait_for("LEAKREF-READY", 600, "guest not ready")
        log(f"guest ready after {t:.0f} s; dumping")
        time.sleep(1)
        qemu.monitor(mon, ["stop", f"dump-guest-memory -p {d}/vmcore.pelf", "quit"])
        g.finish()
    qemu.remove(mon)
    open(os.path.join(d, "complete"), "w").close()
    return d


def main(argv):
    fresh = "--fresh" in argv
    fetch_only = "--fetch-only" in argv
    bad = [a for a in argv if a not in ("--fresh", "--fetch-only")]
    if bad:
        raise Fail(f"unknown argument {bad[0]}", 2)
    c = cache_dir("LEAKREF_KCACHE", "/var/cache/leakref/kernel")
    c = os.path.join(c, "kmemleak")
    os.makedirs(c, exist_ok=True)
    need_tools(["qemu-system-x86_64", "busybox", "cpio", "apt-get", "dpkg-deb", "gcc", "make", "flex",
                "bison", "bc", "xz"])
    with locked(os.path.join(c, ".lock")):
        b = kernel_tree(c)
        src = os.path.join(b, "src")
        kver = output(["make", "-s", "-C", src, "ARCH=x86_64", "kernelrelease"]).strip()
        if fetch_only:
            print_kv([("KVER", kver), ("VMLINUX", os.path.join(src, "vmlinux"))])
            return 0
        d = guest(c, b, kver, fresh)
    print_kv([("KVER", kver), ("VMLINUX", os.path.join(src, "vmlinux")), ("DIR", d),
              ("PELF", f"{d}/vmcore.pelf"), ("SERIAL", f"{d}/serial.log"),
              ("KO_LEAK", f"{d}/lrkleak.ko")])
    return 0
