"""The kernel and trace benches (lrtools.bench): leakref in crash against
crash's own commands on a real Debian guest, and leakref-trace's overhead on a
real GlusterFS mount."""
import json
import os
import re
import statistics
import subprocess
import tempfile
import time

from .bench import build_dir, timed
from .common import SOURCE, Fail, output


def guest(kernel):
    """A 768 MiB guest's dumps (scripts/kernel-vmcore), as a dict."""
    out = output([os.path.join(SOURCE, "scripts/kernel-vmcore"), "--kernel", kernel, "--mem", "768M"])
    return dict(l.split("=", 1) for l in out.splitlines() if "=" in l)


def crash_session(g, cmds, work, name):
    """Runs crash on the guest's ELF dump with `cmds`; its stdout, and the
    T=… stamps the commands' `!date +T=%s.%N` printed."""
    path = os.path.join(work, name + ".cmds")
    with open(path, "w") as f:
        f.write("\n".join(cmds) + "\n")
    r = subprocess.run(["timeout", "-k", "5", "1200", "crash", "-s", "--no_crashrc", g["VMLINUX"],
                        g["PELF"], "-i", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, errors="replace")
    stamps = {m.group(1): float(m.group(2))
              for m in re.finditer(r"^([A-Za-z0-9_-]+)=([0-9.]+)$", r.stdout, re.M)}
    return r.stdout + r.stderr, stamps


def kernel():
    """Per-entry cost of `leakref walk` (the crash extension) against crash's
    own `list -s` with the same fields, in one crash session on the same real
    Debian 6.1 vmcore; slab caches against kmem -S; the reference index
    against search -k; the slab pass on 7.x against 6.1."""
    b = build_dir()
    lr = os.path.join(b, "leakref")
    ext = os.path.join(b, "leakref.so")
    g = guest("6.1")
    sbs = json.loads(output([lr, "kernel", "--vmcore", g["PELF"], "--vmlinux", g["VMLINUX"], "inodes",
                             "-t", "tmpfs", "--json"]))["super_blocks"]
    big = max(sbs, key=lambda s: s["inode_count"])
    small = [s for s in sbs if 200 <= s["inode_count"] <= 1000][0]
    with tempfile.TemporaryDirectory(prefix="leakref-bench-kernel.") as w:
        walks(g, lr, ext, big, small, w)
        slabs(g, lr, ext, w)
        index(g, lr, ext, w)
        slab_pass(g, lr)
    return 0


def walks(g, lr, ext, big, small, w):
    walk = (f'leakref walk --type "struct inode" --head {big["s_inodes"]} --list-member i_sb_list '
            f'--refcount i_count --show i_ino --summary --stats')
    ver = output(["crash", "--version"], check=False).strip().splitlines()
    print(f"bench-kernel: {ver[0] if ver else 'crash'}, vmcore {g['PELF']}")
    out, t = crash_session(g, [f"extend {ext}", "!date +T0=%s.%N", walk, "!date +T1=%s.%N", walk,
                               "!date +T2=%s.%N",
                               f"list -o inode.i_sb_list -H {small['s_inodes']} -s inode.i_ino,i_count",
                               "!date +T3=%s.%N",
                               f"list -o inode.i_sb_list -H {small['s_inodes']} -S inode.i_ino,i_count",
                               "!date +T4=%s.%N", "exit"], w, "walk")
    if "visited" not in out:
        raise Fail("bench-kernel: leakref walk did not run\n" + out[-2000:])
    part = out[out.index("T2="):out.index("T3=")]
    nlist = part.count("i_ino = ")
    eng = [float(x) / 1e3 for x in re.findall(r"walked and evaluated \d+ objects in ([0-9.]+) ms", out)[:2]]
    nbig, nsmall = big["inode_count"], small["inode_count"]
    first, second, lists, list_s = (t["T1"] - t["T0"], t["T2"] - t["T1"], t["T3"] - t["T2"],
                                    t["T4"] - t["T3"])
    if nlist != nsmall:
        print(f"  list -s printed {nlist} entries, expected {nsmall}")
    pl = lists / nsmall
    print(f"  list -s  inode.i_ino,i_count : {nsmall:>6} entries in {lists:8.3f} s = {pl*1e3:10.3f} ms/entry")
    print(f"  list -S  inode.i_ino,i_count : {nsmall:>6} entries in {list_s:8.3f} s = "
          f"{list_s/nsmall*1e3:10.3f} ms/entry")

    def row(name, secs):
        pe = secs / nbig
        print(f"  {name:<30}: {nbig:>6} entries in {secs:8.4f} s = {pe*1e6:8.3f} us/entry = "
              f"{nbig/secs/1e6:6.2f} M entries/s; {pl/pe:>9,.0f}x cheaper per entry than list -s")
    if len(eng) == 2:
        row("walk, cold page cache", eng[0])
        row("walk, warm", eng[1])
    row("2nd command, whole", second)
    row("1st command, whole", first)
    print(f"  (the 1st command of a session also indexes the vmlinux DWARF and symbols: "
          f"{first - (eng[0] if eng else 0):.2f} s, once per crash session)")
    # The same walk standalone (libkdumpfile and the ELF reader), for reference.
    for f in (g["KDUMP"], g["PELF"]):
        wall, rss = timed("/dev/null", [lr, "kernel", "--vmcore", f, "--vmlinux", g["VMLINUX"], "walk",
                                        "--type", "struct inode", "--head", big["s_inodes"],
                                        "--list-member", "i_sb_list", "--refcount", "i_count",
                                        "--show", "i_ino", "--summary", "--stats"])
        print(f"  standalone {os.path.basename(f)}: {wall} s wall, {rss} KB max RSS (whole process)")


REP, KREP = 50, 5


def slabs(g, lr, ext, w):
    """`leakref slab --cache C` against crash's own `kmem -S C`, warm, in one
    session; `!date` itself costs milliseconds (crash forks a shell), so the
    median of five empty intervals is subtracted, and leakref, much faster
    than that, runs REP times between its two dates, kmem -S KREP times. The
    session's first slab command (which scans the struct page array and keeps
    its slab heads) is timed alone, and crash's own cost of any command."""
    cmds = [f"extend {ext}", "leakref slab --cache filp > /dev/null", "!date +C0=%s.%N",
            "leakref slab --cache kmem_cache --scan-pages > /dev/null", "!date +C1=%s.%N"]
    cmds += [f"!date +E{i}=%s.%N" for i in range(6)]
    cmds += ["!date +F0=%s.%N"] + ["eval 1 > /dev/null"] * REP + ["!date +F1=%s.%N"]
    for c in ("filp", "dentry", "kmalloc-8"):
        v = c.replace("-", "_")
        cmds += [f"leakref slab --cache {c} > /dev/null", f"kmem -S {c} > /dev/null", f"!date +L0_{v}=%s.%N"]
        cmds += [f"leakref slab --cache {c} > {w}/lr.{c}"] * REP + [f"!date +L1_{v}=%s.%N"]
        cmds += [f"kmem -S {c} > {w}/km.{c}"] * KREP + [f"!date +L2_{v}=%s.%N"]
    cmds += ["leakref slab > /dev/null", "kmem -s > /dev/null", "!date +A0=%s.%N",
             f"leakref slab > {w}/lr.all", "!date +A1=%s.%N", f"kmem -s > {w}/km.all",
             "!date +A2=%s.%N", "exit"]
    out, t = crash_session(g, cmds, w, "slab")
    if "A2" not in t:
        raise Fail("bench-kernel: the slab session did not finish\n" + out[-2000:])
    e = [t[f"E{i}"] for i in range(6)]
    tick = statistics.median(b - a for a, b in zip(e, e[1:]))
    floor = max(t["F1"] - t["F0"] - tick, 0) / REP
    print("  slab caches, one crash session, warm (leakref slab --cache C vs kmem -S C; per listed object;")
    print(f"  a !date costs {tick*1e3:.2f} ms, subtracted from each interval;")
    print(f"  crash's own cost of any command (eval 1): {(t['F1']-t['F0']-tick)/REP*1e3:.3f} ms, in both "
          f"tools' figures;")
    print(f"  the session's first scan of the struct page array (kept for the session): "
          f"{(t['C1']-t['C0']-tick)*1e3:.1f} ms):")
    for c in ("filp", "dentry", "kmalloc-8"):
        v = c.replace("-", "_")
        with open(f"{w}/lr.{c}") as f:
            lr_n = sum(1 for l in f if l.startswith("0x"))
        with open(f"{w}/km.{c}") as f:
            km = f.read()
        km_n = len(re.findall(r"^\s+\[[0-9a-f]+\]", km, re.M))
        lines = km.splitlines()
        km_alloc = next((int(lines[i + 1].split()[2]) for i, l in enumerate(lines)
                         if l.startswith("CACHE") and i + 1 < len(lines)), 0)
        lt = max(t[f"L1_{v}"] - t[f"L0_{v}"] - tick, 1e-6) / REP
        kt = max(t[f"L2_{v}"] - t[f"L1_{v}"] - tick, 1e-6) / KREP
        lpo = lt / max(lr_n, 1)
        kpo = kt / km_n if km_n else float("nan")
        ratio = (f"{kpo / lpo:,.0f}x cheaper per listed object" if km_n else
                 f"kmem -S listed no object; per allocated object {kt / max(km_alloc, 1) * 1e6:.2f} us, "
                 f"{kt / max(km_alloc, 1) / lpo:,.1f}x")
        print(f"    {c:<10} leakref {lt*1e3:8.3f} ms, {lr_n:>6} objects listed ({lpo*1e6:7.3f} us/object); "
              f"kmem -S {kt*1e3:8.2f} ms, {km_n:>6} of its {km_alloc} allocated listed "
              f"({kpo*1e6:8.2f} us/object): {ratio}")
        if km_n:
            net = ((kt - floor) / km_n) / (max(lt - floor, 1e-9) / max(lr_n, 1))
            print(f"{'':15}without crash's own cost of a command in either: {net:,.0f}x")
    print(f"    every cache: leakref slab {1e3*(t['A1']-t['A0']-tick):.1f} ms (the session's slab pages), "
          f"kmem -s {1e3*(t['A2']-t['A1']-tick):.1f} ms")
    for f in (g["PELF"], g["KDUMP"]):
        wall, rss = timed("/dev/null", [lr, "kernel", "--vmcore", f, "--vmlinux", g["VMLINUX"], "slab",
                                        "--cache", "filp"])
        print(f"  standalone slab --cache filp on {os.path.basename(f)}: {wall} s wall, {rss} KB max RSS "
              f"(whole process)")


def index(g, lr, ext, w):
    """The reference index: the whole index of the 768 MiB guest standalone
    (goal: at most 2 s, and at most 5 % of the guest's RAM held by the index),
    the retained-size tree over it (goal: at most 2 s),
    and in one crash session (the first `leaks` builds it, a later `refs`
    reuses it) beside crash's own `search -k` for the same value."""
    print("  reference index (kernel leaks / refs), guest RAM 768 MiB:")
    ram = 768 << 20
    for f in (g["PELF"], g["KDUMP"]):
        wall, rss = timed(f"{w}/leaks.json", [lr, "kernel", "--vmcore", f, "--vmlinux", g["VMLINUX"],
                                              "leaks", "--json"])
        with open(f"{w}/leaks.json") as fh:
            j = json.load(fh)
        ix = j["index"]
        print(f"    standalone leaks on {os.path.basename(f)}: {wall:.2f} s wall "
              f"(index {ix['build_ns']/1e9:.2f} s: {ix['objects']} objects, {ix['references']} references, "
              f"{ix['bytes_scanned']/2**20:.0f} MiB scanned); index memory {ix['memory_bytes']/2**20:.1f} MiB = "
              f"{100*ix['memory_bytes']/ram:.2f} % of the guest's RAM; {rss/1024:.0f} MiB max RSS "
              f"(whole process: the dump pages it read, mapped or cached, included); "
              f"{j['summary']['objects']} unreferenced objects")
    wall, rss = timed(f"{w}/retained.json", [lr, "kernel", "--vmcore", g["PELF"], "--vmlinux",
                                             g["VMLINUX"], "retained", "--json"])
    with open(f"{w}/retained.json") as fh:
        j = json.load(fh)
    st = j["stats"]
    print(f"    standalone retained (the kernel's dominator tree) on {os.path.basename(g['PELF'])}: "
          f"{wall:.2f} s wall (goal: at most 2 s): index {st['index_ns']/1e9:.2f} s, graph "
          f"{st['graph_ns']/1e9:.3f} s, dominators {st['dominators_ns']/1e9:.3f} s, sizes "
          f"{st['sizes_ns']/1e9:.3f} s; {j['heap']['blocks']} objects; {rss/1024:.0f} MiB max RSS")
    target = json.loads(output([lr, "kernel", "--vmcore", g["PELF"], "--vmlinux", g["VMLINUX"], "leaks",
                                "--cache", "lrk_obj", "--json"]))["caches"][0]["objects"][0]["addr"]
    out, t = crash_session(g, [f"extend {ext}", "!date +R0=%s.%N", f"leakref leaks > {w}/crash-leaks.txt",
                               "!date +R1=%s.%N", f"leakref refs {target} > {w}/crash-refs.txt",
                               "!date +R2=%s.%N", f"search -k {target[2:]} > {w}/crash-search.txt",
                               "!date +R3=%s.%N", "exit"], w, "refs")
    if "R3" not in t:
        raise Fail("bench-kernel: the refs session did not finish\n" + out[-2000:])
    print(f"    in crash: leakref leaks (builds the index, 1st command) {t['R1']-t['R0']:.2f} s; "
          f"leakref refs (reuses it) {(t['R2']-t['R1'])*1e3:.0f} ms; crash's search -k for the same "
          f"value {t['R3']-t['R2']:.2f} s")


def slab_pass(g, lr):
    """The slab pass on sid's 7.x (sheaves, per_node lists) against Debian 12's
    6.1, the same guest setup: `leakref kernel slab` whole process, run
    alternately on the two dumps (the page cache warm for both), the median of
    7 pairs. Goal: 7.x within 1.5x of 6.1."""
    print("  slab pass, every cache, standalone, 6.1 vs 7.x (median of 7 alternating pairs):")
    k7 = guest("7.x")

    def one(d):
        return timed("/dev/null", [lr, "kernel", "--vmcore", d["PELF"], "--vmlinux", d["VMLINUX"], "slab"])[0]
    one(g), one(k7)
    a, b = [], []
    for _ in range(7):
        a.append(one(g))
        b.append(one(k7))
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"    6.1 {ma:.2f} s, 7.x {mb:.2f} s: 7.x/6.1 = {mb/ma:.2f}x (goal: at most 1.5x)")


# ---- trace: leakref-trace's overhead on GlusterFS ------------------------

def trace():
    """Overhead of leakref-trace on a real GlusterFS FUSE I/O workload (root): a
    volume on loopback, then ROUNDS interleaved pairs of the same I/O loop
    (100 files: create+write 4 KiB, stat, read, 30 renames, unlink; then reads
    of older files), once untraced and once with the capture attached. Prints
    per-loop times, the median ratio, events/s and lost records."""
    if os.getuid() != 0:
        raise Fail("bench-trace: needs root (glusterd, FUSE, uprobes)")
    if not subprocess.run(["sh", "-c", "command -v bpftrace"], stdout=subprocess.DEVNULL).returncode == 0:
        raise Fail("bench-trace: bpftrace missing (make test-deps)")
    env_sh = os.path.join(SOURCE, "tests/gluster/env.sh")
    rounds = int(os.environ.get("ROUNDS", "5"))
    d = tempfile.mkdtemp(prefix="leakref-bench-trace.", dir="/tmp")
    env = dict(os.environ, LEAKREF=os.path.join(build_dir(), "leakref"))
    try:
        subprocess.run(["bash", env_sh, "start", d], check=True)
        subprocess.run(["bash", env_sh, "workload", d], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(d, "state/volume")) as f:
            vol = f.read().strip()
        pid = output(["pgrep", "-f", f"glusterfs.*--volfile-id={vol} {d}/mnt"]).split()[0]

        def loop(tag):
            t0 = time.monotonic()
            subprocess.run(["bash", env_sh, "io", d, tag], check=True, stdout=subprocess.DEVNULL)
            return time.monotonic() - t0
        subprocess.run(["bash", env_sh, "io", d, "warm"], stdout=subprocess.DEVNULL, check=True)
        plain, traced, events, lost, secs = [], [], 0, 0, 0.0
        for r in range(1, rounds + 1):
            p = loop(f"p{r}")
            ready = os.path.join(d, "ready")
            if os.path.exists(ready):
                os.unlink(ready)
            lrt = os.path.join(d, f"t{r}.lrt")
            with open(os.path.join(d, f"t{r}.err"), "w") as err:
                tr = subprocess.Popen([os.path.join(SOURCE, "scripts/leakref-trace"), "-p", pid, "-o", lrt,
                                       "--ready", ready], stderr=err, env=env)
            for _ in range(600):
                if os.path.exists(ready):
                    break
                time.sleep(0.1)
            t = loop(f"t{r}")
            time.sleep(1)
            tr.send_signal(15)
            tr.wait()
            with open(lrt, errors="replace") as f:
                text = f.read()
            e = len(re.findall(r"^E ", text, re.M))
            m = re.search(r"^X .*\blost=(\d+)", text, re.M)
            l = int(m.group(1)) if m else 0
            events, lost, secs = events + e, lost + l, secs + t
            plain.append(p)
            traced.append(t)
            print(f"round {r}: untraced {p:6.3f} s   traced {t:6.3f} s   {e:7d} events  {l} lost")
        mp, mt = statistics.median(plain), statistics.median(traced)
        print(f"median loop: untraced {mp:.3f} s, traced {mt:.3f} s, overhead {mt / mp:.2f}x (target <= 2x)")
        print(f"events: {events} in {secs:.3f} s of traced loops ({events / secs:.0f} events/s), lost {lost}")
    finally:
        subprocess.run(["bash", env_sh, "stop", d])
    return 0
