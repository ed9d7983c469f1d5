"""Real Debian kernel vmcores for leakref's kernel tests and benches.

Downloads one of Debian's kernels and its -dbg vmlinux (cached), boots a
busybox initramfs under QEMU (TCG) that sets up known state
(fixtures/kernel/init, lrholder.c, lrlocks.c, lrkleak.c) with SLUB's
allocation tracking on for the file cache and lrkleak's
(slub_debug=U,filp,lrk_obj), and dumps guest memory from the QEMU monitor at
two moments:
  vmcore.pelf    A: ELF with virtual addresses (dump-guest-memory -p)
  vmcore.elf     A: QEMU's default ELF, physical addresses only (no -p; what
                 `virsh dump --memory-only` writes too)
  vmcore.kdump   A: kdump-compressed (dump-guest-memory -z, then makedumpfile -R)
  vmcore-b.pelf  B: after the guest opened and holds 25 more files (the host
                 asks through a second serial port)
The guest prints /proc/slabinfo right before each dump (LEAKREF-SLABINFO and
LEAKREF-SLABINFO-B lines in serial.log).
Prints KEY=VALUE lines (KVER, VMLINUX, DIR, PELF, ELF, KDUMP, PELF_B, SERIAL,
KO, KO_LEAK).

The arm64 guest (--kernel arm64) differs: QEMU 7.2 has no guest page tables to
write virtual addresses from on arm, so PELF and PELF_B are its
physical-address ELF dumps (vmcore.elf, vmcore-b.elf; -p writes the same
bytes); its -z dump is kept as QEMU writes it (64 KiB blocks for a 4 KiB-page
kernel, which leakref refuses) and printed as KDUMP_Z, KDUMP being empty; and
the fixture modules are cross-built (aarch64-linux-gnu-gcc, with this
machine's kbuild tools of the same release).

usage: scripts/kernel-vmcore [--kernel 5.10|6.1|6.12|7.x|arm64] [--files N] [--mem SIZE]
                             [--fresh] [--fetch-only]
       scripts/kernel-vmcore [--kernel K] --build-modules DIR
         builds the modules of DIR/Kbuild for that kernel as the fixture
         modules are built, and prints nothing else
  --kernel 5.10  Debian 11's kernel (bullseye's linux-image-amd64, through a
                 private package list in the cache)
  --kernel 6.1   Debian 12's default kernel (linux-image-amd64), the default
  --kernel 6.12  Debian 12's 6.12 kernel (linux-image-6.12-amd64)
  --kernel 7.x   Debian sid's kernel (its linux-image-amd64, a 7.x). Its
                 modules are built in a tree of sid's packages
                 (scripts/debian-root): its kbuild tools need glibc 2.38 and
                 its flags gcc-16, neither of which bookworm has.
  --kernel arm64 Debian 12's arm64 kernel (linux-image-arm64 of the arm64
                 architecture, through a package list of its own) under
                 qemu-system-aarch64 (virt machine), with busybox-static for
                 arm64, lrholder and the fixture modules built with
                 aarch64-linux-gnu-gcc.
  --mem SIZE     the guest's memory (default 512M: the 40,000 files and the
                 fixtures' objects need under 200 MiB; the benches ask for 768M)
  --fetch-only   download and extract the kernel, boot nothing (a CI step run
                 while leakref builds)
env: LEAKREF_KCACHE (default /var/cache/leakref/kernel) holds the extracted
kernels (bzImage, modules, -dbg vmlinux; the .debs are deleted once
extracted) and the dumps of the current guest setup of each kernel and
memory size, which are reused while their inputs are unchanged.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

from . import qemu
from .apt import PrivateApt, deb_members, extract
from .common import Fail, SOURCE, cache_dir, key_of, locked, logger, need_tools, print_kv, rmtree, run

log = logger("kernel-vmcore")

FLAVOURS = {
    "5.10": dict(meta="linux-image-amd64", vpat=r"^5\.10\.", release="bullseye"),
    "6.1": dict(meta="linux-image-amd64", vpat=r"^6\.1\..*-amd64$", release=None),
    "6.12": dict(meta="linux-image-6.12-amd64", vpat=r"^6\.12\.", release=None),
    "7.x": dict(meta="linux-image-amd64", vpat=r"^7\.", release="sid"),
    # arm64's packages, and amd64's kbuild tools to cross-build modules with.
    "arm64": dict(meta="linux-image-arm64", vpat=r"^6\.1\..*-arm64$", release="bookworm",
                  arches=["arm64", "amd64"]),
}
MODS = ["drivers/firmware/qemu_fw_cfg.ko", "fs/binfmt_misc.ko", "fs/fat/fat.ko", "fs/fat/vfat.ko"]
# arm64's virt machine: the host's command port is a virtconsole.
ARM_MODS = ["drivers/virtio/virtio_mmio.ko", "drivers/char/virtio_console.ko"]
# What shapes a guest's state: a change to any of these makes new dumps.
GUEST_FILES = ["fixtures/kernel/init", "fixtures/kernel/lrholder.c", "fixtures/kernel/lrlocks.c",
               "fixtures/kernel/lrkleak.c", "scripts/lrtools/kernel_vmcore.py",
               "scripts/lrtools/qemu.py"]


class Kernel:
    """One flavour's packages, extracted files and apt."""

    def __init__(self, flavour, cache):
        if flavour not in FLAVOURS:
            raise Fail(f"--kernel takes 5.10, 6.1, 6.12, 7.x or arm64, not '{flavour}'", 2)
        f = FLAVOURS[flavour]
        self.flavour, self.c, self.arm = flavour, cache, flavour == "arm64"
        self.meta, self.vpat = f["meta"], f["vpat"]
        rel, arches = f["release"], f.get("arches")
        base = os.path.join(cache, "apt", rel + ("-cross" if arches else "")) if rel else cache
        self.apt = PrivateApt(base, rel, arches)
        self.mods = MODS + (ARM_MODS if self.arm else [])
        self.pkg = self.kver = ""

    def resolve(self):
        """The kernel package the flavour's meta package names today; offline,
        the newest of this flavour already extracted."""
        self.apt.update(max_age=86400)
        self.pkg = next((d for d in self.apt.depends(self.meta) if re.match(r"linux-image-[0-9]", d)), "")
        if not self.pkg:
            have = [os.path.basename(p)[len("vmlinux-"):] for p in
                    glob.glob(os.path.join(self.c, "dbg/usr/lib/debug/boot/vmlinux-*"))]
            have = sorted((v for v in have if re.search(self.vpat, v)), key=version_key)
            if have:
                self.pkg = "linux-image-" + have[-1]
        if not self.pkg:
            raise Fail(f"cannot determine the kernel package (apt-cache depends {self.meta})")
        self.kver = self.pkg[len("linux-image-"):]

    @property
    def vmlinuz(self):
        return os.path.join(self.c, "img/boot", "vmlinuz-" + self.kver)

    @property
    def vmlinux(self):
        return os.path.join(self.c, "dbg/usr/lib/debug/boot", "vmlinux-" + self.kver)

    @property
    def busybox(self):
        return os.path.join(self.c, "img/arm64/bin/busybox") if self.arm else shutil.which("busybox") or ""

    def module(self, m):
        return os.path.join(self.c, "img/lib/modules", self.kver, "kernel", m)

    def extracted(self):
        files = [self.vmlinuz, self.vmlinux, self.busybox] + [self.module(m) for m in self.mods]
        return all(f and os.path.getsize(f) > 0 for f in files if os.path.exists(f)) and all(
            f and os.path.exists(f) for f in files)

    def fetch(self):
        """Downloads and extracts what is missing; the packages go once done."""
        if self.extracted():
            return
        # Each kernel downloads into a folder of its own: several are fetched
        # side by side (scripts/provision), and each deletes its packages.
        debs = os.path.join(self.c, "debs", self.flavour)
        # 7.x splits the image: linux-image-KVER is a meta package over
        # linux-binary-KVER (vmlinuz) and linux-modules-KVER; its -dbg keeps
        # vmlinux under lib/modules/KVER/, not boot/.
        img = [d for d in self.apt.depends(self.pkg) if re.match(r"linux-(binary|modules)-[0-9]", d)]
        img = img or [self.pkg]
        if self.arm:
            img.append("busybox-static")
        dbg = self.pkg + "-dbg"
        if not all(glob.glob(os.path.join(debs, p + "_*.deb")) for p in img + [dbg]):
            log(f"downloading {' '.join(img)} and {dbg} (~1 GB)")
            self.apt.download(img + [dbg], debs, check=False)
            if not glob.glob(os.path.join(debs, dbg + "_*.deb")):
                raise Fail(f"download of {dbg} failed")
        log("extracting bzImage and modules")
        self._extract_image(img, debs)
        log(f"extracting vmlinux from {dbg}")
        self._extract_vmlinux(glob.glob(os.path.join(debs, dbg + "_*.deb"))[0])
        rmtree(debs)

    def _extract_image(self, img, debs):
        root = os.path.join(self.c, "img")
        kv = self.kver
        os.makedirs(os.path.join(root, "boot"), exist_ok=True)
        os.makedirs(os.path.join(root, "lib/modules", kv), exist_ok=True)
        os.makedirs(os.path.join(root, "arm64"), exist_ok=True)
        for p in img:
            deb = glob.glob(os.path.join(debs, p + "_*.deb"))[0]
            listing = set(deb_members(deb))
            # vmlinuz in boot/ (up to 6.12) or in usr/lib/modules/KVER/ (7.x);
            # 6.12's modules are xz-compressed (NAME.ko.xz).
            want = [z for z in (f"./boot/vmlinuz-{kv}", f"./usr/lib/modules/{kv}/vmlinuz") if z in listing]
            for m in self.mods:
                for base in (f"./lib/modules/{kv}/kernel/{m}", f"./usr/lib/modules/{kv}/kernel/{m}"):
                    want += [base + x for x in ("", ".xz") if base + x in listing]
            if want:
                extract(deb, root, want)
            if p == "busybox-static":
                extract(deb, os.path.join(root, "arm64"), ["./bin/busybox"])
        usr = os.path.join(root, "usr/lib/modules", kv)
        if os.path.isdir(usr):
            if os.path.exists(os.path.join(usr, "vmlinuz")):
                os.replace(os.path.join(usr, "vmlinuz"), self.vmlinuz)
            run(["cp", "-a", usr + "/.", os.path.join(root, "lib/modules", kv) + "/"])
            rmtree(usr)
        # busybox's insmod wants the modules plain.
        xz = glob.glob(os.path.join(root, "lib/modules", kv, "**/*.ko.xz"), recursive=True)
        if xz:
            run(["xz", "-d", "-f", *xz])

    def _extract_vmlinux(self, deb):
        # vmlinux is an early member up to 6.12: tar stops there (4 s, not 60).
        rel = f"usr/lib/debug/boot/vmlinux-{self.kver}"
        if self.flavour == "7.x":
            rel = f"usr/lib/debug/lib/modules/{self.kver}/vmlinux"
        dbg = os.path.join(self.c, "dbg")
        extract(deb, dbg, ["./" + rel], first_only=True)
        got = os.path.join(dbg, rel)
        os.makedirs(os.path.dirname(self.vmlinux), exist_ok=True)
        if os.path.exists(got) and got != self.vmlinux:
            os.replace(got, self.vmlinux)
        if not os.path.exists(self.vmlinux) or os.path.getsize(self.vmlinux) == 0:
            raise Fail(f"vmlinux-{self.kver} not found in {os.path.basename(deb)}")


def version_key(v):
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", v)]


class Modules:
    """Builds a Kbuild directory's modules for one kernel: against Debian's
    linux-headers for exactly that kernel, downloaded and unpacked into the
    cache, never installed (a headers package depends on its kernel image,
    which would land in the machine's own /boot); 7.x's in a tree of sid's
    packages."""

    def __init__(self, k):
        self.k = k

    def headers(self):
        k = self.k
        root = os.path.join(k.c, "hdrs", k.kver)
        hdrs = os.path.join(root, "usr/src", "linux-headers-" + k.kver)
        if os.path.exists(os.path.join(root, "complete")):
            return hdrs
        rmtree(root)
        os.makedirs(root)
        pkgs = ["linux-headers-" + k.kver] + [
            d for d in k.apt.depends("linux-headers-" + k.kver)
            if re.match(r"linux-(headers-.*-common|kbuild-)", d)]
        # Cross-building: this machine's kbuild tools (modpost, fixdep).
        if k.arm:
            pkgs = [p + ":amd64" if p.startswith("linux-kbuild-") else p for p in pkgs]
        log(f"downloading {' '.join(pkgs)}")
        tmp = os.path.join(k.c, "debs-h", k.kver)
        rmtree(tmp)
        k.apt.download(pkgs, tmp, check=False)
        for d in glob.glob(os.path.join(tmp, "*.deb")):
            run(["dpkg-deb", "-x", d, root])
        rmtree(tmp)
        if not os.path.exists(os.path.join(hdrs, "Makefile")):
            raise Fail(f"linux-headers-{k.kver} could not be downloaded")
        # Its Makefile includes the -common tree by absolute path.
        mk = os.path.join(hdrs, "Makefile")
        with open(mk) as f:
            text = f.read()
        with open(mk, "w") as f:
            f.write(text.replace("include /usr/src/", f"include {root}/usr/src/"))
        open(os.path.join(root, "complete"), "w").close()
        return hdrs

    def build(self, d, out=None):
        k = self.k
        if k.flavour == "7.x":
            # sid's headers, kbuild tools and gcc-16, in a tree of sid's packages.
            from .debian_root import tree, run_in
            root = tree("kbuild-7.x", "sid", ["make", "linux-headers-" + k.kver])
            return run_in(root, ["make", "-s", "-C", f"/usr/src/linux-headers-{k.kver}", f"M={d}",
                                 "modules"], binds_rw=[d], stdout=out, stderr=out)
        hdrs = self.headers()
        # Debian's headers name the compiler their kernel was built with
        # (.kernelvariables: gcc-10 for bullseye's); without it here, this
        # machine's gcc builds the fixture modules.
        cross = "aarch64-linux-gnu-" if k.arm else ""
        cmd = ["make", "-s", "-C", hdrs, f"M={d}"] + ([f"CROSS_COMPILE={cross}"] if cross else [])
        try:
            with open(os.path.join(hdrs, ".kernelvariables")) as f:
                m = re.search(r"^CC = .*\)(gcc-[0-9]+)$", f.read(), re.M)
        except OSError:
            m = None
        if m and not shutil.which(cross + m.group(1)):
            cmd.append(f"CC={cross}gcc")
        return subprocess.run(cmd + ["modules"], stdout=out, stderr=out).returncode


def make_initramfs(k, d, nfiles):
    root = os.path.join(d, "root")
    for sub in ("bin", "sbin", "usr/bin", "usr/sbin", "dev", "proc", "sys", "tmp", "mnt/leak",
                "lib/modules"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    shutil.copy(k.busybox, os.path.join(root, "bin/busybox"))
    cc = "aarch64-linux-gnu-gcc" if k.arm else "gcc"
    run([cc, "-O2", "-static", "-Wall", "-Wextra", "-o", os.path.join(root, "bin/lrholder"),
         os.path.join(SOURCE, "fixtures/kernel/lrholder.c")])
    for m in k.mods:
        shutil.copy(k.module(m), os.path.join(root, "lib/modules"))
    mod = os.path.join(d, "mod")
    os.makedirs(mod, exist_ok=True)
    for f in ("lrlocks.c", "lrkleak.c"):
        shutil.copy(os.path.join(SOURCE, "fixtures/kernel", f), mod)
    with open(os.path.join(mod, "Kbuild"), "w") as f:
        f.write("obj-m := lrlocks.o lrkleak.o\n")
    with open(os.path.join(mod, "build.log"), "w") as out:
        rc = Modules(k).build(mod, out)
    if rc != 0:
        with open(os.path.join(mod, "build.log")) as f:
            tail = "\n".join(f.read().splitlines()[-20:])
        raise Fail(f"building fixtures/kernel/lrlocks.c and lrkleak.c for {k.kver} failed:\n{tail}")
    # Kept beside the dumps: their DWARF gives the modules' types (--ko).
    for ko in ("lrlocks.ko", "lrkleak.ko"):
        shutil.copy(os.path.join(mod, ko), d)
        shutil.copy(os.path.join(mod, ko), os.path.join(root, "lib/modules"))
    rmtree(mod)
    shutil.copy(os.path.join(SOURCE, "fixtures/kernel/init"), os.path.join(root, "init"))
    os.chmod(os.path.join(root, "init"), 0o755)
    cpio = subprocess.Popen("find . | cpio -o -H newc --owner=0:0 2>/dev/null | gzip -1",
                            shell=True, cwd=root, stdout=subprocess.PIPE)
    with open(os.path.join(d, "initramfs.cpio.gz"), "wb") as f:
        shutil.copyfileobj(cpio.stdout, f)
    if cpio.wait() != 0:
        raise Fail("making the initramfs failed")
    rmtree(root)


def boot_and_dump(k, d, nfiles, mem):
    """Boots the guest and dumps it at moments A and B."""
    log(f"booting {k.kver} under QEMU TCG ({nfiles} files, {mem})")
    serial, mon, ctl = (os.path.join(d, n) for n in ("serial.log", "mon.sock", "ctl.sock"))
    # ttyS0 (arm64: ttyAMA0): the console (serial.log); ttyS1 (arm64: the
    # virtconsole hvc0): the host's commands to init (ctl.sock: "more" takes
    # the guest from moment A to moment B).
    common = ["-accel", "tcg", "-m", mem, "-smp", "1", "-display", "none", "-no-reboot",
              "-nodefaults", "-device", "vmcoreinfo", "-kernel", k.vmlinuz,
              "-initrd", os.path.join(d, "initramfs.cpio.gz"), "-serial", "file:" + serial,
              "-chardev", f"socket,id=ctl,path={ctl},server=on,wait=off",
              "-monitor", f"unix:{mon},server,nowait"]
    args = f"panic=-1 quiet lr_files={nfiles} slub_debug=U,filp,lrk_obj"
    if k.arm:
        argv = ["qemu-system-aarch64", "-M", "virt", "-cpu", "max", *common,
                "-append", f"console=ttyAMA0 lr_ctl=/dev/hvc0 {args}",
                "-device", "virtio-serial-device", "-device", "virtconsole,chardev=ctl"]
    else:
        argv = ["qemu-system-x86_64", *common, "-append", f"console=ttyS0 {args}",
                "-device", "isa-serial,chardev=ctl"]
    v = lambda n: os.path.join(d, n)  # noqa: E731
    with qemu.Guest(argv, serial, log) as g:
        t = g.wait_for("LEAKREF-READY", 300, "guest not ready")
        log(f"guest ready after {t:.0f} s; dumping moment A")
        a = ["stop", f"dump-guest-memory {v('vmcore.elf')}", f"dump-guest-memory -z {v('vmcore.flat')}", "cont"]
        if not k.arm:
            a.insert(1, f"dump-guest-memory -p {v('vmcore.pelf')}")
        qemu.monitor(mon, a)
        qemu.send_line(ctl, "more")
        g.wait_for("LEAKREF-READY2", 120, "guest did not reach moment B")
        log("moment B; dumping")
        b = f"dump-guest-memory {v('vmcore-b.elf')}" if k.arm else f"dump-guest-memory -p {v('vmcore-b.pelf')}"
        qemu.monitor(mon, ["stop", b, "quit"])
        g.finish()
    # QEMU 7.2 writes -z in makedumpfile's flattened format; libkdumpfile
    # wants the normal one.
    with open(v("vmcore.flat"), "rb") as src:
        run(["makedumpfile", "-R", v("vmcore.kdump")], stdin=src, quiet=True)
    qemu.remove(v("vmcore.flat"), mon, ctl)


def guest(k, nfiles, mem, fresh):
    """The dumps of the current guest setup (made when missing); its directory."""
    key = key_of(k.kver, nfiles, mem, files=GUEST_FILES)
    d = os.path.join(k.c, f"dump-{k.flavour}-{mem}-{key}")
    if not fresh and os.path.exists(os.path.join(d, "complete")):
        return d
    # One dump set is ~1.7 GB: drop those of older setups of this flavour and
    # memory size (and the unflavoured ones earlier versions made).
    for old in glob.glob(os.path.join(k.c, "dump-*")):
        name = os.path.basename(old)
        if old != d and (name.startswith(f"dump-{k.flavour}-{mem}-") or re.fullmatch(r"dump-[0-9a-f]+", name)
                         or re.fullmatch(rf"dump-{re.escape(k.flavour)}-[0-9a-f]+", name)):
            rmtree(old)
    rmtree(d)
    os.makedirs(d)
    make_initramfs(k, d, nfiles)
    boot_and_dump(k, d, nfiles, mem)
    open(os.path.join(d, "complete"), "w").close()
    return d


def parse(argv):
    o = dict(kernel="6.1", files=40000, mem="512M", fresh=False, fetch_only=False, build_modules="")
    it = iter(argv)
    for a in it:
        if a in ("--kernel", "--files", "--mem", "--build-modules"):
            val = next(it, None)
            if val is None:
                raise Fail(f"{a} needs a value", 2)
            o[a[2:].replace("-", "_")] = int(val) if a == "--files" else val
        elif a in ("--fresh", "--fetch-only"):
            o[a[2:].replace("-", "_")] = True
        elif a in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        else:
            raise Fail(f"unknown argument {a}", 2)
    if not re.fullmatch(r"[0-9]+[MG]", o["mem"]):
        raise Fail(f"--mem takes a size like 512M, not '{o['mem']}'", 2)
    return o


def main(argv):
    o = parse(argv)
    c = cache_dir("LEAKREF_KCACHE", "/var/cache/leakref/kernel")
    for sub in ("debs", "img", "dbg"):
        os.makedirs(os.path.join(c, sub), exist_ok=True)
    k = Kernel(o["kernel"], c)
    tools = ["qemu-system-aarch64", "aarch64-linux-gnu-gcc"] if k.arm else [
        "qemu-system-x86_64", "busybox", "gcc", "make"]
    need_tools(tools + ["cpio", "makedumpfile", "dpkg-deb", "apt-get"], "make deps installs it")
    # One run at a time per kernel and cache: two at once (two test shards)
    # would download into one place; the second finds the work done.
    with locked(os.path.join(c, ".lock-" + k.flavour)):
        k.resolve()
        k.fetch()
        if o["fetch_only"]:
            print_kv([("KVER", k.kver), ("VMLINUX", k.vmlinux)])
            return 0
        if o["build_modules"]:
            d = os.path.realpath(o["build_modules"])
            if not os.path.exists(os.path.join(d, "Kbuild")):
                raise Fail(f"--build-modules: no Kbuild in {o['build_modules']}", 2)
            return Modules(k).build(d)
        d = guest(k, o["files"], o["mem"], o["fresh"])
    p = "elf" if k.arm else "pelf"
    out = [("KVER", k.kver), ("VMLINUX", k.vmlinux), ("DIR", d), ("PELF", f"{d}/vmcore.{p}"),
           ("ELF", f"{d}/vmcore.elf"), ("PELF_B", f"{d}/vmcore-b.{p}"), ("SERIAL", f"{d}/serial.log"),
           ("KO", f"{d}/lrlocks.ko"), ("KO_LEAK", f"{d}/lrkleak.ko")]
    out += [("KDUMP", ""), ("KDUMP_Z", f"{d}/vmcore.kdump")] if k.arm else [("KDUMP", f"{d}/vmcore.kdump")]
    print_kv(out)
    return 0
