// The crash extension's C++ side: one session per loaded extension (vmlinux
// types resolved once, a page cache over readmem), and the same kernel
// subcommands as `leakref kernel`, writing to crash's output.
#include <fmt/format.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "corelib/dump/pagecache.hpp"
#include "corelib/dump/physdump.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/kernel/cmd_kernel.hpp"
#include "leakref_host.h"
#include "targets/linux/kernel.hpp"

namespace {

std::atomic<bool> g_interrupted{false};

struct Session {
  std::string namelist;
  uint64_t kaslr = 0;
  const lr_host* host = nullptr;
  std::unique_ptr<lr::PhysDump> phys;  // set when the dump is an ELF file
  std::unique_ptr<lr::PagedMemory> mem;
  std::unique_ptr<lr::KernelTarget> k;
  std::set<std::string> module_files;  // `mod -s` files already added

  // A page: straight from the mmapped ELF dump (no copy) when crash can
  // translate the address and the dump holds the page, else copied through
  // readmem (kdump files, excluded pages, anything unusual).
  static const uint8_t* map(void* self, uint64_t page) {
    auto* s = static_cast<Session*>(self);
    uint64_t pa = 0;
    if (!s->phys || !s->host->kvtop || s->host->kvtop(page, &pa) != 1) return nullptr;
    return s->phys->at(pa, lr::PagedMemory::kPage);
  }
  static bool symbol(void* self, const char* name, uint64_t* addr) {
    auto* s = static_cast<Session*>(self);
    return s->host->symbol && s->host->symbol(name, addr) == 1;
  }
  static bool read(void* self, uint64_t addr, void* buf, size_t len) {
    auto* s = static_cast<Session*>(self);
    return s->host->read(addr, buf, len) == 1;
  }
};

// A plain pointer, not a unique_ptr: the shim's destructor frees it at
// `extend -u` and at exit, which may run after this DSO's static destructors.
Session* g_session = nullptr;

struct HostOut final : lrcli::Out {
  const lr_host* h;
  explicit HostOut(const lr_host* host) : h(host) {}
  bool write(std::string_view s) override { return h->write(s.data(), s.size()) == 0; }
};

struct HostErr final : lrcli::Out {
  const lr_host* h;
  explicit HostErr(const lr_host* host) : h(host) {}
  bool write(std::string_view s) override {
    h->error(s.data(), s.size());
    return true;
  }
};

// The session for this crash run, made on the first command that needs a
// kernel (and again on a live system, or if crash changed its vmlinux).
lr::Result<lr::KernelTarget*> session(const lr_host* host) {
  if (!g_session || g_session->namelist != host->namelist ||
      g_session->kaslr != host->kaslr_offset || host->live) {
    auto s = std::make_unique<Session>();
    s->namelist = host->namelist ? host->namelist : "";
    s->kaslr = host->kaslr_offset;
    s->host = host;
    if (host->dumpfile && *host->dumpfile && !host->live) {
      auto pd = lr::PhysDump::open(host->dumpfile);
      if (pd.ok()) s->phys = std::move(pd).value();  // not ELF: readmem only
    }
    s->mem = std::make_unique<lr::PagedMemory>(&Session::read, s.get(), "the dump", 1ull << 30,
                                               &Session::map);
    LR_ASSIGN(s->k, lr::KernelTarget::attach(s->mem.get(), s->namelist, s->kaslr));
    s->k->prog().set_symbol_fallback(&Session::symbol, s.get());
    // The KASLR offset and the vmlinux must agree with crash's own view.
    uint64_t ours = 0, theirs = 0;
    if (auto it = s->k->symbol("init_task"); it.ok()) ours = it.value();
    if (host->symbol && host->symbol("init_task", &theirs) == 1 && ours != theirs)
      return lr::make_error(lr::Errc::kBadFormat,
                            fmt::format("{}: init_task at {:#x}, crash says {:#x} (not the "
                                        "vmlinux crash is using?)",
                                        s->namelist, ours, theirs));
    delete g_session;
    g_session = s.release();
  }
  g_session->host = host;
  // The module objects crash loaded with `mod -s` give their types to
  // leakref too; each file is tried once per session, a failure said once.
  const char* path = nullptr;
  for (int i = 0; host->module_file && host->module_file(i, &path) == 1; ++i) {
    if (!g_session->module_files.insert(path).second) continue;
    if (auto r = g_session->k->add_module_debuginfo(path); !r.ok()) {
      std::string m = "leakref: warning: " + r.error().message + "\n";
      host->error(m.data(), m.size());
    }
  }
  return g_session->k.get();
}

int run(const lr_host* host, int argc, char** argv) {
  HostOut out(host);
  HostErr err(host);
  // crash keeps a double-quoted argument whole, quotes included, and splits
  // a single-quoted one at its spaces: undo both ('struct inode').
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i] ? argv[i] : "";
    if (!a.empty() && a.front() == '\'') {
      while ((a.size() < 2 || a.back() != '\'') && i + 1 < argc) a += std::string(" ") + argv[++i];
    }
    if (a.size() >= 2 && (a.front() == '"' || a.front() == '\'') && a.back() == a.front())
      a = a.substr(1, a.size() - 2);
    args.push_back(std::move(a));
  }
  if (args.empty()) args.push_back("--help");
  g_interrupted.store(false);
  std::string source = host->dumpfile && *host->dumpfile ? host->dumpfile : "live";
  auto open = [&]() { return session(host); };
  int rc = lrcli::run_kernel_command(open, args, source, out, err, &g_interrupted);
  if (g_interrupted.load()) err.print("leakref: interrupted\n");
  return rc;
}

}  // namespace

extern "C" int leakref_crash_run(const lr_host* host, int argc, char** argv) {
  lrcli::start_front_end();
  try {
    return run(host, argc, argv);
  } catch (const std::exception& e) {
    std::string m = std::string("leakref: internal error: ") + e.what() + "\n";
    host->error(m.data(), m.size());
  } catch (...) {
    static const char m[] = "leakref: internal error\n";
    host->error(m, sizeof m - 1);
  }
  return lrcli::kInternal;
}

extern "C" void leakref_crash_interrupt(void) {
  g_interrupted.store(true);
}

extern "C" void leakref_crash_unload(void) {
  delete g_session;
  g_session = nullptr;
}
