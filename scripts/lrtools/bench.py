"""The benches: leakref side by side with drgn, chap, crash and an untraced run,
whole process, on real cores and dumps. Figures, never assertions on time: a
bench fails only when an answer is wrong (counts against a fixture's manifest,
objects against drgn's).

usage: scripts/bench walks|batch|refs|cxx|kernel|trace   (BUILD: the build directory)
  walks   leakref vs drgn walking a 1,000,000-node list and hash table in one
          core (walk rates, output, one-process repeats), the heap walk and
          diff on >= 5 M allocations (make bench)
  batch   batch run over a 40-dump archive, -j 1 and -j 2 (make bench)
  refs    the reference index at scale: leaks and account on >= 5 M
          allocations (chap beside it with CHAP=/path/to/chap), the same
          program on jemalloc and tcmalloc, and a >= 8 GB core
          (BENCH_REFS_GB, default 8) (make bench)
  cxx     C++ on one core: walk --std over a std::map and a std::unordered_map
          of 1 M entries each against gdb's libstdc++ pretty-printers (the
          same entries, in the same order); the shared_ptr census on 5 M
          control blocks against leaks (make bench)
  kernel  the crash extension vs crash's own list -s, kmem -S, search -k on a
          768 MiB Debian 6.1 guest; the slab pass on 7.x vs 6.1
          (make bench-kernel)
  trace   leakref-trace's overhead on a real GlusterFS FUSE I/O loop (root)
          (make bench-trace)
env: BUILD (default build), BENCH_NODES (1000000), BENCH_HEAP_NODES (2600000),
     BENCH_REFS_GB (8), BENCH_CXX_ENTRIES (1000000), BENCH_CXX_OWNED (5000000),
     BENCH_GDB_SECONDS (600: gdb's print stopped there gives a lower bound),
     CHAP, ROUNDS (trace: 5)
"""
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from .common import SOURCE, Fail, output


def build_dir():
    return os.path.join(SOURCE, os.environ.get("BUILD", "build"))


class Work:
    """A scratch directory removed at the end, and the fixtures run in it."""

    def __init__(self, name):
        self.dir = tempfile.mkdtemp(prefix=f"leakref-bench-{name}.", dir="/tmp")
        self.procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def path(self, name):
        return os.path.join(self.dir, name)

    def start(self, argv, name, env=None):
        """Starts a fixture whose stdout goes to NAME.ready; waits for READY."""
        out = open(self.path(name + ".ready"), "w")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.procs.append(p)
        for _ in range(60000):
            with open(self.path(name + ".ready"), errors="replace") as f:
                if "READY" in f.read():
                    return p
            if p.poll() is not None:
                raise Fail(f"{argv[0]} exited before READY")
            time.sleep(0.01)
        raise Fail(f"{argv[0]} not ready")

    def gcore(self, p, prefix):
        """A gcore of process `p` written back to disk (the kernel's flusher
        would otherwise share the CPUs with what is timed); its path."""
        subprocess.run(["gcore", "-o", prefix, str(p.pid)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        core = f"{prefix}.{p.pid}"
        subprocess.run(["sync", "-f", core], check=False)
        return core

    def snap(self, name, exe, args, env=None):
        """Runs a fixture (manifest NAME.json first), gcores it, kills it."""
        p = self.start([exe, self.path(name + ".json"), *args], name, env)
        core = self.gcore(p, self.path(name))
        p.kill()
        p.wait()
        return core


def measure(out, argv, limit=None):
    """Runs argv with stdout to `out`: (seconds, peak anonymous bytes, peak
    RSS bytes), sampled from /proc every 5 ms. With `limit`, a run still
    going after `limit` seconds is killed and its seconds are None."""
    with open(out, "w") as f:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.DEVNULL)
        anon = hwm = 0
        while p.poll() is None:
            if limit is not None and time.monotonic() - t0 > limit:
                p.kill()
                p.wait()
                return None, anon, hwm
            try:
                with open(f"/proc/{p.pid}/status") as st:
                    for line in st:
                        k, v = line.split(":", 1)
                        if k == "RssAnon":
                            anon = max(anon, int(v.split()[0]) * 1024)
                        if k == "VmHWM":
                            hwm = max(hwm, int(v.split()[0]) * 1024)
            except (OSError, ValueError):
                pass
            time.sleep(0.005)
        dt = time.monotonic() - t0
    if p.returncode != 0:
        raise Fail(f"{' '.join(argv)} exited {p.returncode}")
    return dt, anon, hwm


def timed(out, argv):
    """Runs argv with stdout to `out`: (wall seconds, peak RSS KiB)."""
    tf = out + ".time"
    with open(out, "w") as f:
        r = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", tf, *argv], stdout=f,
                           stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        raise Fail(f"{' '.join(argv)} exited {r.returncode}")
    with open(tf) as f:
        wall, rss = f.read().split()[-2:]
    return float(wall), int(rss)


def load(path):
    with open(path) as f:
        return json.load(f)


def median(xs):
    return statistics.median(xs)


# ---- walks: leakref vs drgn on one core ----------------------------------

def walks():
    b = build_dir()
    lr = os.path.join(b, "leakref")
    n = int(os.environ.get("BENCH_NODES", "1000000"))
    with Work("walks") as w:
        core = w.snap("core", os.path.join(b, "fixtures/fx_big"), [str(n)])
        m = load(w.path("core.json"))
        buckets = m["structures"]["hash"]["buckets"]
        print(f"core: {os.path.getsize(core) >> 20} MiB, {n} list nodes, {n} hash entries in "
              f"{buckets} buckets")
        lst = ["--type", "struct bnode", "--head", "big_list", "--list-member", "link",
               "--refcount", "refcount"]
        hsh = ["--type", "struct hnode", "--head", "*big_hash", "--buckets", str(buckets),
               "--hlist-member", "hnode", "--refcount", "refcount"]
        best = {}
        for what, args in (("list", lst), ("hash", hsh)):
            runs = []
            for _ in range(5):
                t0 = time.monotonic_ns()
                with open(w.path(what + ".json"), "w") as f:
                    subprocess.run([lr, "walk", core, "--json", "--summary", "--stats", *args],
                                   stdout=f, stderr=subprocess.DEVNULL, check=True)
                runs.append((load(w.path(what + ".json"))["summary"]["walk_ns"],
                             time.monotonic_ns() - t0))
            ns, wall = min(runs)
            best[what] = (ns, wall, sorted(r[0] for r in runs)[2])
        # The same walks repeated in one process (a crash session, a library
        # user): the first of 10 and the best.
        repeat = output([os.path.join(b, "walk_repeat"), core, str(buckets)])
        print("drgn: walking (this takes a while)...")
        d0 = time.monotonic_ns()
        with open(w.path("drgn.json"), "w") as f:
            subprocess.run(["/usr/bin/python3", os.path.join(SOURCE, "bench/drgn_walk.py"), core,
                            str(buckets)], stdout=f, check=True)
        dwall = time.monotonic_ns() - d0
        ok = walk_output(w, lr, core, lst, n)
        ok = heap_and_diff(w, b, lr, core, n) and ok
        ok = walk_rates(w, m, n, best, dwall, repeat) and ok
    return 0 if ok else 1


def walk_output(w, lr, core, lst, n):
    """Whole process with output, same core: every list object written out by
    leakref (JSON, JSON lines, text) and by drgn (a JSON line per object).
    Peak RSS above the --summary run's is what output costs beyond the core
    pages the walk touches. Targets: JSON >= 25x drgn, <= 64 MiB above; text
    >= 300 MB/s."""
    s_wall, s_rss = timed("/dev/null", [lr, "walk", core, *lst, "--json", "--summary"])
    j_wall, j_rss = timed(w.path("objs.json"), [lr, "walk", core, *lst, "--json"])
    l_wall, _ = timed(w.path("objs.jsonl"), [lr, "walk", core, *lst, "--jsonl"])
    t_wall, _ = timed(w.path("objs.txt"), [lr, "walk", core, *lst])
    print("drgn: writing every list object (this takes a while)...")
    e_wall, e_rss = timed(w.path("drgn.jsonl"), ["/usr/bin/python3",
                                                 os.path.join(SOURCE, "bench/drgn_walk.py"), core,
                                                 "--emit"])
    objs = load(w.path("objs.json"))["objects"]
    with open(w.path("objs.jsonl")) as f:
        lines = [json.loads(l) for l in f]
    with open(w.path("drgn.jsonl")) as f:
        drgn = [json.loads(l) for l in f]
    same = ([(o["addr"], o["refcount"]) for o in objs] == [(d["addr"], d["refcount"]) for d in drgn]
            == [(o["addr"], o["refcount"]) for o in lines if o["record"] == "object"])
    tbytes = os.path.getsize(w.path("objs.txt"))
    print(f"whole process, {n} objects written: leakref --json {j_wall:.2f} s (peak {j_rss/1024:.0f} MiB,"
          f" {(j_rss - s_rss)/1024:.0f} MiB above --summary's), --jsonl {l_wall:.2f} s, text {t_wall:.2f} s"
          f" ({tbytes/1e6:.0f} MB: {tbytes/1e6/max(t_wall, 0.01):.0f} MB/s whole process,"
          f" {tbytes/1e6/max(t_wall - s_wall, 0.01):.0f} MB/s beyond the --summary run's {s_wall:.2f} s);"
          f" drgn {e_wall:.2f} s (peak {e_rss/1024:.0f} MiB): --json {e_wall/max(j_wall, 0.01):.0f}x faster")
    print("output targets: --json >= 25x drgn, <= 64 MiB above the walk's pages, text >= 300 MB/s;",
          "same objects as drgn" if same else "MISMATCH with drgn")
    return same


def heap_and_diff(w, b, lr, core, n):
    """glibc heap walk on a second fx_big core with >= 5 M allocations (each
    list node and hash entry is one malloc). Reference points: chap ~1 us and
    ~210 B per allocation; drgn has no heap walker. Target: <= 0.1 us and
    <= 32 B per allocation. Then diff of the two cores, against the counts."""
    hn = int(os.environ.get("BENCH_HEAP_NODES", "2600000"))
    heapcore = w.snap("heapcore", os.path.join(b, "fixtures/fx_big"), [str(hn)])
    best = None
    for _ in range(5):
        with open(w.path("heap.json"), "w") as f:
            subprocess.run([lr, "heap", heapcore, "--json", "--stats"], stdout=f, check=True)
        j = load(w.path("heap.json"))
        s = j["stats"]
        r = (j["walk_ns"] / s["in_use"], s["index_bytes"] / s["in_use"], s["in_use"])
        best = r if best is None or r[0] < best[0] else best
    df_wall, df_rss = timed(w.path("diff.json"), [lr, "diff", core, heapcore, "--json"])
    j = load(w.path("diff.json"))
    c = next(c for c in j["classes"] if c["kind"] == "heap" and c["name"] == "40 B")
    ok = c["delta"] == 2 * (hn - n)
    print(f"diff of two fx_big cores ({c['before']} and {c['after']} allocations of 40 B):"
          f" {df_wall:.2f} s whole process, peak {df_rss/1024:.0f} MiB;"
          f" {'delta exact' if ok else 'delta MISMATCH'}")
    os.unlink(heapcore)
    ns, per, cnt = best
    print(f"heap walk: {cnt} in-use chunks, {ns:.1f} ns and {per:.1f} B per allocation (best of 5; "
          f"target <= 100 ns, <= 32 B; chap ~1000 ns, ~210 B)")
    if cnt < 2 * hn:
        print(f"heap walk MISMATCH: expected at least {2 * hn} chunks")
        return False
    return ok


def walk_rates(w, m, n, best, dwall, repeat):
    ms = m["structures"]
    d = load(w.path("drgn.json"))
    ok = True
    for what in ("list", "hash"):
        lrs = load(w.path(what + ".json"))["summary"]
        want = ms[what]
        for who, got_n, got_h in (("leakref", lrs["visited"], lrs["histogram"]),
                                  ("drgn", d[what]["count"], d[what]["histogram"])):
            want_h = {k: v for k, v in want["histogram"].items() if v}
            if got_n != want["count"] or got_h != want_h:
                print(f"MISMATCH {who} {what}: {got_n} {got_h} vs manifest {want['count']} {want['histogram']}")
                ok = False
    print()
    print(f"{'walk':<6} {'leakref nodes/s':>16} {'drgn nodes/s':>14} {'ratio':>8}   leakref walk  drgn walk"
          f"   leakref median of 5")
    for what in ("list", "hash"):
        ns, _, med = best[what]
        lr_rate = n / (ns / 1e9)
        dr_rate = n / d[what]["seconds"]
        print(f"{what:<6} {lr_rate/1e6:>14.1f} M {dr_rate/1e6:>12.3f} M {lr_rate/dr_rate:>7.0f}x   "
              f"{ns/1e6:>9.1f} ms  {d[what]['seconds']*1e3:>7.0f} ms"
              f"   {med/1e6:.1f} ms ({n/(med/1e9)/1e6:.1f} M/s)")
    for line in repeat.splitlines():
        what, cnt, first, bst = line.split()
        print(f"{what} walked 10 times in one process: first {int(first)/1e6:.1f} ms, best "
              f"{int(bst)/1e6:.1f} ms ({int(cnt)/(int(bst)/1e9)/1e6:.1f} M nodes/s)")
    print(f"whole process: leakref list {best['list'][1]/1e9:.2f} s, hash {best['hash'][1]/1e9:.2f} s; "
          f"drgn (setup {d['setup_s']:.2f} s + both walks) {dwall/1e9:.2f} s")
    print("targets: >= 50 M nodes/s and >= 50x drgn;",
          "counts and histograms match the manifest" if ok else "MISMATCH")
    return ok


# ---- batch: an archive of 40 dumps ---------------------------------------

def batch():
    """batch run over a 40-dump archive (30 cores of a live fx_steady, 6 other
    fixture cores, 4 compressed ones: zstd, xz, lz4, gzip) with -j 1 and -j 2
    into fresh databases: dumps/s, the batch process's peak RSS and the
    largest worker's (each dump is its own process)."""
    b = build_dir()
    with Work("batch") as w:
        a = w.path("archive")
        os.makedirs(a)
        cores = {}
        for f in ("structs", "threads", "heap", "locks"):
            p = w.start([os.path.join(b, f"fixtures/fx_{f}"), w.path(f + ".json")], f)
            cores[f] = w.gcore(p, os.path.join(a, "core." + f))
            p.kill()
        p = w.start([os.path.join(b, "fixtures/fx_structs_pie"), w.path("pie.json")], "pie")
        w.gcore(p, os.path.join(a, "core.structs_pie"))
        p.kill()
        sp = w.start([os.path.join(b, "fixtures/fx_steady")], "steady")
        for i in range(1, 31):
            w.gcore(sp, os.path.join(a, f"core.steady.{i:02d}"))
        sp.kill()
        p = w.start([os.path.join(b, "fixtures/fx_big"), w.path("big.json"), "100000"], "big")
        w.gcore(p, os.path.join(a, "core.big"))
        p.kill()
        locks = cores["locks"]
        for tool, name in ((["zstd", "-q", "-c"],
                            "core.fx_locks.0.00000000000000000000000000000000.1.1764057600000000.zst"),
                           (["xz", "-T1", "-c"], "core.locks.xz"), (["lz4", "-q", "-c"], "core.locks.lz4"),
                           (["gzip", "-c"], "core.locks.gz")):
            with open(os.path.join(a, name), "wb") as f:
                subprocess.run([*tool, locks], stdout=f, check=True)
        n = len(os.listdir(a))
        size = output(["du", "-sh", a]).split()[0]
        print(f"batch archive: {n} dumps, {size}")
        for j in (1, 2):
            db = w.path(f"j{j}.db")
            wall, rss = timed("/dev/null", [os.path.join(b, "leakref"), "batch", "run", a, "--db", db,
                                            "-j", str(j), "-q"])
            rows, ok, worker = output(["sqlite3", "-separator", " ", db,
                                       "SELECT count(*), sum(status = 'ok'), max(peak_rss_kib) FROM dumps"]).split()
            if int(rows) != n or int(ok) != n:
                print(f"batch -j {j}: {rows} rows, {ok} ok of {n}: MISMATCH")
                return 1
            print(f"batch -j {j}: {n} dumps in {wall:.2f} s = {n/wall:.1f} dumps/s; peak RSS "
                  f"{rss/1024:.0f} MiB (largest of the batch and its workers), largest worker "
                  f"{int(worker)/1024:.0f} MiB (its row in the database)")
    return 0


# ---- refs: the reference index at scale ----------------------------------

def check_leaks(out, manifest):
    j, m = load(out), load(manifest)
    s = j["summary"]
    want = (m["leaked"], m["leaked_bytes"], m["unreferenced"])
    got = (s["leaked"], s["leaked_bytes"], s["unreferenced"])
    if got != want:
        raise Fail(f"leakref leaks: {got} != manifest {want}")


def check_account(out, manifest):
    j, m = load(out), load(manifest)
    got = next(c["bytes"] for c in j["categories"] if c["name"] == "leaked")
    if got != m["leaked_bytes"]:
        raise Fail(f"leakref account: leaked {got} != manifest {m['leaked_bytes']}")
    if j["total_bytes"] != j["writable_bytes"]:
        raise Fail("leakref account: the total is not the writable memory")


def refs():
    """The reference index at scale: 1. >= 5 M allocations (leaks, account,
    chap when CHAP is given), 1b. the same program on jemalloc and tcmalloc,
    2. a core of >= BENCH_REFS_GB GB (index rate, memory beyond the core's
    pages). Not in the tests: the big core takes minutes and 16+ GB."""
    b = build_dir()
    lr = os.path.join(b, "leakref")
    fx = os.path.join(b, "fixtures/fx_heapscale")
    with Work("refs") as w:
        many(w, lr, fx)
        allocators(w, lr, fx)
        huge(w, lr, fx, int(os.environ.get("BENCH_REFS_GB", "8")))
    return 0


def many(w, lr, fx):
    core = w.snap("many", fx, ["240", "64"])
    allocs = load(w.path("many.json"))["blocks_allocated"]
    print(f"core 1: {os.path.getsize(core) >> 20} MiB, {allocs} allocations (fx_heapscale 240 MB, "
          f"payload <= 64 B)")
    lt, at = [], []
    for _ in range(5):
        s, anon, hwm = measure(w.path("many.out.json"), [lr, "leaks", core, "--json"])
        check_leaks(w.path("many.out.json"), w.path("many.json"))
        lt.append(s)
        s, _, acc_hwm = measure(w.path("many.acc.json"), [lr, "account", core, "--json"])
        check_account(w.path("many.acc.json"), w.path("many.json"))
        at.append(s)
    print(f"leakref leaks: best {min(lt):.3f} s, median {median(lt):.3f} s, peak RSS {hwm >> 20} MiB "
          f"(anonymous {anon >> 20} MiB); leaked/unreferenced = manifest")
    print(f"leakref account: best {min(at):.3f} s, median {median(at):.3f} s, peak RSS {acc_hwm >> 20} MiB; "
          f"leaked bytes = manifest; total = writable memory")
    print(f"account / leaks (paired, alternating): {median(at) / median(lt):.2f}x (median); target <= 1.20x")
    retained(w, lr, core, "many", median(lt))
    chap = os.environ.get("CHAP", "")
    if not chap or not os.access(chap, os.X_OK):
        print("chap: not measured (CHAP=/path/to/chap to compare; chap is not in Debian)")
    else:
        with open(w.path("chap.cmd"), "w") as f:
            f.write("count leaked\ncount unreferenced\n")
        ct = []
        for _ in range(3):
            s, anon, hwm = measure(w.path("chap.out"), ["sh", "-c", f"exec '{chap}' '{core}' < '{w.path('chap.cmd')}'"])
            ct.append(s)
        with open(w.path("chap.out")) as f:
            got = [int(x) for x in re.findall(r"^(\d+) allocations use", f.read(), re.M)]
        m = load(w.path("many.json"))
        if got != [m["leaked"], m["unreferenced"]]:
            raise Fail(f"chap: {got} != manifest")
        print(f"chap count leaked + count unreferenced: best {min(ct):.3f} s, median {median(ct):.3f} s, "
              f"peak RSS {hwm >> 20} MiB; leaked/unreferenced = manifest")
        print(f"leakref / chap: {min(ct) / min(lt):.1f}x (best), {median(ct) / median(lt):.1f}x (median); "
              f"target >= 10x")
    os.unlink(core)


def retained(w, lr, core, name, leaks_s):
    """`retained` on the core leaks just ran on: whole process, medians of 3,
    against leaks' median; where its time goes (its own stats); the memory
    beyond the core's mapped pages. The leaked node must retain exactly the
    manifest's leaked bytes."""
    rt, anon = [], 0
    for _ in range(3):
        s, a, _ = measure(w.path(name + ".retained.json"), [lr, "retained", core, "--json"])
        rt.append(s)
        anon = max(anon, a)
    j = load(w.path(name + ".retained.json"))
    m = load(w.path(name + ".json"))
    if j["heap"]["leaked_bytes"] != m["leaked_bytes"]:
        raise Fail(f"leakref retained: leaked {j['heap']['leaked_bytes']} != manifest {m['leaked_bytes']}")
    st = j["stats"]
    size = os.path.getsize(core)
    print(f"leakref retained: median {median(rt):.3f} s = {median(rt) / leaks_s:.2f}x leaks (target <= 1.5x): "
          f"index {st['index_ns']/1e9:.2f} s, graph {st['graph_ns']/1e9:.2f} s, dominators "
          f"{st['dominators_ns']/1e9:.2f} s, sizes {st['sizes_ns']/1e9:.2f} s, paths {st['paths_ns']/1e9:.2f} s, types "
          f"{st['types_ns']/1e9:.2f} s; anonymous memory {anon >> 20} MiB = {100 * anon / size:.1f} % of "
          f"the core (target <= 10 %); leaked bytes = manifest")


def allocators(w, lr, fx):
    """The same program on jemalloc (built from Debian's source, 48-bit) and
    tcmalloc beside a glibc run of the same size: heap and leaks, paired and
    alternating, medians of 5; each against its manifest (tcmalloc leaks one
    8-byte block of its own besides, gperftools' default MallocExtension)."""
    lib = lambda tool, *a: re.search(r"^LIB=(.*)$", output([os.path.join(SOURCE, "scripts", tool), *a]),  # noqa: E731
                                     re.M).group(1)
    jlib, tlib = lib("jemalloc-build", "48"), lib("tcmalloc-build")
    cores = {"glibc": w.snap("glibc", fx, ["240", "64"]),
             "jemalloc": w.snap("jemalloc", fx, ["240", "64"], dict(os.environ, LD_PRELOAD=jlib)),
             "tcmalloc": w.snap("tcmalloc", fx, ["240", "64"], dict(os.environ, LD_PRELOAD=tlib))}
    m = load(w.path("tcmalloc.json"))
    m["leaked"] += 1
    m["leaked_bytes"] += 8
    m["unreferenced"] += 1
    with open(w.path("tcmalloc.json"), "w") as f:
        json.dump(m, f)
    heap = {a: [] for a in cores}
    leaks = {a: [] for a in cores}
    for _ in range(5):
        for a, core in cores.items():
            heap[a].append(measure(w.path(a + ".heap"), [lr, "heap", core])[0])
        for a, core in cores.items():
            leaks[a].append(measure(w.path(a + ".leaks.json"), [lr, "leaks", core, "--json"])[0])
            check_leaks(w.path(a + ".leaks.json"), w.path(a + ".json"))
    for a in ("jemalloc", "tcmalloc"):
        h, gh, l, gl = median(heap[a]), median(heap["glibc"]), median(leaks[a]), median(leaks["glibc"])
        print(f"{a} / glibc, same program, whole process (paired, alternating, medians of 5): heap "
              f"{h:.3f} / {gh:.3f} s = {h / gh:.2f}x, leaks {l:.3f} / {gl:.3f} s = {l / gl:.2f}x; target <= 1.5x")
    for core in cores.values():
        os.unlink(core)


def huge(w, lr, fx, gb):
    core = w.snap("huge", fx, [str(gb * 1024), "2048"])
    size = os.path.getsize(core)
    print(f"core 2: {size >> 30} GiB ({size} bytes)")
    lt, at = [], []
    for _ in range(3):
        s, anon, hwm = measure(w.path("huge.out.json"), [lr, "leaks", core, "--json"])
        lt.append(s)
        s, _, acc_hwm = measure(w.path("huge.acc.json"), [lr, "account", core, "--json"])
        at.append(s)
    check_leaks(w.path("huge.out.json"), w.path("huge.json"))
    check_account(w.path("huge.acc.json"), w.path("huge.json"))
    s, acc_s = median(lt), median(at)
    retained(w, lr, core, "huge", s)
    print(f"leakref account on core 2: median {acc_s:.2f} s against leaks {s:.2f} s (paired, alternating, "
          f"3 each) = {acc_s / s:.2f}x (target <= 1.20x); peak RSS {acc_hwm / 2**30:.2f} GiB")
    j = load(w.path("huge.out.json"))
    ix = j["index"]
    print(f"index build: {ix['build_ns']/1e9:.2f} s over {ix['bytes_scanned']/2**30:.2f} GiB scanned = "
          f"{ix['bytes_scanned'] / ix['build_ns']:.2f} GB/s (target >= 1); {ix['refs']} references, "
          f"{(ix['index_bytes'] + ix['table_bytes'])/2**20:.0f} MiB of index and tables")
    blocks = j["summary"]["blocks"]
    print(f"leakref leaks whole process: {s:.2f} s; peak RSS {hwm/2**30:.2f} GiB, of which anonymous "
          f"(beyond the mapped core pages) {anon/2**20:.0f} MiB = {100*anon/size:.2f} % of the core "
          f"(target <= 5 %), {anon/blocks:.1f} bytes per allocation ({blocks} allocations, mean block "
          f"{size/blocks:.0f} bytes)")
    os.unlink(core)


# ---- C++: containers against gdb's printers, the shared_ptr census -------

PAIR = re.compile(r"\[(-?\d+)\] = (-?\d+)")


def cxx():
    b = build_dir()
    lr, fx = os.path.join(b, "leakref"), os.path.join(b, "fixtures", "fx_cxxscale")
    n = int(os.environ.get("BENCH_CXX_ENTRIES", "1000000"))
    owned = int(os.environ.get("BENCH_CXX_OWNED", "5000000"))
    with Work("cxx") as w:
        core = w.snap("cxx", fx, [str(n), str(owned)])
        m = load(w.path("cxx.json"))
        print(f"core: {os.path.getsize(core) >> 20} MiB (fx_cxxscale: a std::map and a std::unordered_map "
              f"of {n} entries, {owned} + {2 * m['cycles'] + 1} shared_ptr control blocks)")
        for g in ("g_map", "g_umap"):
            cxx_walk(w, lr, fx, core, g, m)
        census(w, lr, core, m)
        os.unlink(core)
    return 0


def walk_entries(path):
    """(key, value) of each object record of `walk --jsonl`, and its summary."""
    entries, summary = [], None
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r["record"] == "object":
                entries.append((r["fields"]["first"], r["fields"]["second"]))
            elif r["record"] == "summary":
                summary = r["summary"]
    return entries, summary


def cxx_walk(w, lr, fx, core, g, m):
    """leakref walk --std (medians of 3) against gdb printing the container
    with its libstdc++ printer (once: it is the slow side), whole process;
    both must give the manifest's entries, and the same ones in order."""
    out = w.path(g + ".jsonl")
    lt = [measure(out, [lr, "walk", core, "--std", "--head", g, "--show", "first,second",
                        "--limit", str(m["entries"] + 1), "--jsonl"])[0] for _ in range(3)]
    entries, summary = walk_entries(out)
    if summary is None or summary["stop"] != "end" or len(entries) != m["entries"]:
        raise Fail(f"leakref walk {g}: {len(entries)} entries, stop {summary and summary['stop']}; "
                   f"manifest {m['entries']}")
    if (sum(k for k, _ in entries), sum(v for _, v in entries)) != (m["key_sum"], m["value_sum"]):
        raise Fail(f"leakref walk {g}: sums differ from the manifest's")
    gout = w.path(g + ".gdb")
    limit = float(os.environ.get("BENCH_GDB_SECONDS", "600"))
    gs, _, ghwm = measure(gout, ["gdb", "-batch", "-nx", "-ex", "set language c++", "-ex",
                                 "set print elements unlimited", "-ex", "set print repeats unlimited",
                                 "-ex", f"print {g}", fx, core], limit)
    walk = f"{g} ({m['entries']} entries): leakref walk --std --jsonl median {median(lt):.2f} s"
    if gs is None:
        # gdb's printer had not printed the container by then: the ratio is
        # at least the limit's.
        print(f"{walk}, gdb print (libstdc++ printer) still printing after {limit:.0f} s (peak RSS "
              f"{ghwm >> 20} MiB, stopped) = more than {limit / median(lt):.0f}x (target >= 50x); "
              f"leakref's entries = manifest")
        return
    with open(gout, errors="replace") as f:
        text = f.read()
    line = next((x for x in text.splitlines() if x.startswith("$1 = ")), "")
    got = [(int(k), int(v)) for k, v in PAIR.findall(line)]
    if got != entries:
        raise Fail(f"gdb print {g}: {len(got)} entries, not leakref's {len(entries)} in the same order")
    print(f"{walk}, gdb print (libstdc++ printer) {gs:.1f} s (peak RSS {ghwm >> 20} MiB) = "
          f"{gs / median(lt):.0f}x (target >= 50x); the same entries in the same order")


def census(w, lr, core, m):
    """leakref shared against leaks on the same core, paired and alternating,
    medians of 3: every control block, its verdict as the manifest says."""
    st, lt = [], []
    for _ in range(3):
        s, anon, _ = measure(w.path("shared.json"), [lr, "shared", core, "--json"])
        st.append(s)
        lt.append(measure(w.path("leaks.json"), [lr, "leaks", core, "--json"])[0])
    j = load(w.path("shared.json"))
    want = {"ok": m["owned"], "leaked-owner": m["leaked_owners"], "extra-owner": 0,
            "leaked": 2 * m["cycles"], "corrupt": 0}
    if j["verdicts"] != want or j["control_blocks"] != sum(want.values()):
        raise Fail(f"leakref shared: {j['control_blocks']} blocks, {j['verdicts']}; manifest {want}")
    print(f"leakref shared ({j['control_blocks']} control blocks): median {median(st):.2f} s against "
          f"leaks {median(lt):.2f} s = {median(st) / median(lt):.2f}x (target <= 1.2x); anonymous "
          f"memory {anon >> 20} MiB; verdicts = manifest")


# ---- CPython: every object and the reconcile, against a gdb Python walk ----

# What a gdb user scripts without leakref: gc.get_objects()' walk of every
# generation's list, each object's type name and refcount read through
# gdb.Value (python3.11-dbg's DWARF).
GDB_PY_WALK = """
import gdb
interp = gdb.parse_and_eval("_PyRuntime")["interpreters"]["head"]
gc = interp["gc"]
heads = [gc["generations"][i]["head"] for i in range(3)] + [gc["permanent_generation"]["head"]]
pyobj = gdb.lookup_type("PyObject").pointer()
gch = gdb.lookup_type("PyGC_Head")
n = 0
by = {}
for h in heads:
    end = int(h.address)
    p = int(h["_gc_next"])
    while p != end:
        g = gdb.Value(p).cast(gch.pointer())
        o = (g + 1).cast(pyobj)
        name = o["ob_type"]["tp_name"].string()
        by[name] = by.get(name, 0) + int(o["ob_refcnt"])
        n += 1
        p = int(g["_gc_next"]) & ~3
print("TRACKED %d" % n)
"""


# The reconcile a gdb user scripts for the same objects: each tracked
# object's header read in one go, its type's name and sizes once per type,
# and its words (its body, a list's items, a dict's entries) counted
# against the tracked objects' addresses; an object counted more times than
# found has excess references.
GDB_PY_RECONCILE = """
import gdb, struct
inf = gdb.selected_inferior()
interp = gdb.parse_and_eval("_PyRuntime")["interpreters"]["head"]
gc = interp["gc"]
heads = [int(gc["generations"][i]["head"].address) for i in range(3)]
heads.append(int(gc["permanent_generation"]["head"].address))
types = {}
def type_of(t):
    if t not in types:
        v = gdb.Value(t).cast(gdb.lookup_type("PyTypeObject").pointer())
        types[t] = (v["tp_name"].string(), int(v["tp_basicsize"]), int(v["tp_itemsize"]),
                    int(v["tp_flags"]))
    return types[t]
objs = []
for h in heads:
    p = struct.unpack("<Q", bytes(inf.read_memory(h, 8)))[0] & ~3
    while p != h:
        nxt, _, rc, tp = struct.unpack("<QQqQ", bytes(inf.read_memory(p, 32)))
        objs.append((p + 16, rc, tp))
        p = nxt & ~3
found = {o: 0 for o, _, _ in objs}
def count(addr, n):
    if n <= 0 or n > (1 << 26):
        return
    b = bytes(inf.read_memory(addr, n * 8))
    for w in struct.unpack("<%dQ" % n, b):
        if w in found:
            found[w] += 1
for o, rc, tp in objs:
    name, basic, item, flags = type_of(tp)
    var = item or flags & (1 << 25)
    size = struct.unpack("<q", bytes(inf.read_memory(o + 16, 8)))[0] if var else 0
    count(o + 8, (basic + abs(size) * item) // 8 - 1)
    if flags & (1 << 25):  # a list: its items
        items = struct.unpack("<Q", bytes(inf.read_memory(o + 24, 8)))[0]
        count(items, size)
    if flags & (1 << 29):  # a dict: its keys table's entries
        keys = struct.unpack("<Q", bytes(inf.read_memory(o + 32, 8)))[0]
        hdr = bytes(inf.read_memory(keys, 32))
        lgi, kind, n = hdr[9], hdr[10], struct.unpack_from("<q", hdr, 24)[0]
        count(keys + 32 + (1 << lgi), n * (3 if kind == 0 else 2))
excess = sum(1 for o, rc, _ in objs if rc > found[o])
print("TRACKED %d EXCESS %d" % (len(objs), excess))
"""


def gdb_python(w, name, text, core):
    """gdb with python3.11 and Python script `text` on `core`, stopped after
    BENCH_GDB_SECONDS: (seconds or None, peak RSS, its output, the limit)."""
    script = w.path(name + ".py")
    with open(script, "w") as f:
        f.write(text)
    limit = float(os.environ.get("BENCH_GDB_SECONDS", "600"))
    gout = w.path(name + ".out")
    gs, _, ghwm = measure(gout, ["gdb", "-batch", "-nx", "-x", script, "/usr/bin/python3.11", core],
                          limit)
    with open(gout, errors="replace") as f:
        return gs, ghwm, f.read(), limit


def gdb_reconcile(w, core, lt, tracked, leak):
    """GDB_PY_RECONCILE on `core`: its time against leakref's `lt`."""
    gs, ghwm, out, limit = gdb_python(w, "reconcile", GDB_PY_RECONCILE, core)
    if gs is None:
        print(f"gdb Python reconcile of the GC's objects: still counting after {limit:.0f} s (peak "
              f"RSS {ghwm >> 20} MiB, stopped) = more than {limit / lt:.0f}x (target >= 100x)")
        return
    got = re.search(r"TRACKED (\d+) EXCESS (\d+)", out)
    if not got or int(got.group(1)) != tracked or int(got.group(2)) < leak:
        raise Fail(f"gdb reconcile: {got and got.groups()}; leakref {tracked} tracked, {leak} leaked")
    print(f"gdb Python reconcile of the GC's objects (type, refcount and the references found to "
          f"each from the others' words; {got.group(2)} with excess): {gs:.1f} s (peak RSS "
          f"{ghwm >> 20} MiB) = {gs / lt:.0f}x (target >= 100x)")


def python():
    """leakref python (every object with its type and refcount, and the
    reconcile) on a core of N items (3 objects each), medians of 3, against
    a gdb Python script walking the GC's lists (gc.get_objects()' objects,
    a third of them) with python3.11-dbg, once, stopped after
    BENCH_GDB_SECONDS; both must find the manifest's counts."""
    b = build_dir()
    lr, fx = os.path.join(b, "leakref"), os.path.join(b, "fixtures", "fx_pyscale.py")
    n = int(os.environ.get("BENCH_PY_ITEMS", "1666667"))
    leak = 100
    with Work("python") as w:
        core = w.snap("py", fx, [str(n), str(leak)])
        m = load(w.path("py.json"))
        runs = [measure(w.path("py.out.json"), [lr, "python", core, "--json", "--top", "0"])
                for _ in range(3)]
        j = load(w.path("py.out.json"))
        item = next((t for t in j["types"] if t["type"] == "Item"), {})
        if item.get("objects") != m["items"] or j["excess_objects"] != leak or item.get("leaked") != leak:
            raise Fail(f"leakref python: {item.get('objects')} Items, {j['excess_objects']} with excess "
                       f"references; manifest {m['items']} and {leak}")
        lt = median([r[0] for r in runs])
        print(f"leakref python ({j['objects']} live objects, {j['tracked']} tracked; core "
              f"{os.path.getsize(core) >> 20} MiB): median {lt:.2f} s, peak RSS {runs[0][2] >> 20} MiB, "
              f"anonymous {runs[0][1] >> 20} MiB (target < 3 s for 5 M objects); the manifest's Items "
              f"and its {leak} leaked references")
        gs, ghwm, out, limit = gdb_python(w, "walk", GDB_PY_WALK, core)
        if gs is None:
            print(f"gdb Python walk of the GC's lists: still walking after {limit:.0f} s (peak RSS "
                  f"{ghwm >> 20} MiB, stopped) = more than {limit / lt:.0f}x (target >= 100x)")
        else:
            got = re.search(r"TRACKED (\d+)", out)
            if not got or int(got.group(1)) != j["tracked"]:
                raise Fail(f"gdb walk: {got and got.group(1)} tracked objects, leakref {j['tracked']}")
            print(f"gdb Python walk of the GC's lists ({j['tracked']} objects, type and refcount each): "
                  f"{gs:.1f} s (peak RSS {ghwm >> 20} MiB) = {gs / lt:.0f}x (target >= 100x); the same "
                  f"tracked objects")
        gdb_reconcile(w, core, lt, j["tracked"], leak)
        os.unlink(core)
    return 0


def main(argv):
    from . import bench_kernel
    benches = {"walks": walks, "batch": batch, "refs": refs, "cxx": cxx, "kernel": bench_kernel.kernel,
               "trace": bench_kernel.trace, "python": python}
    if len(argv) != 1 or argv[0] not in benches:
        raise Fail("usage: bench walks|batch|refs|cxx|python|kernel|trace", 2)
    return benches[argv[0]]()
