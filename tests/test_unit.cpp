// Unit tests of corelib pieces that need no core: path parsing, filters, and
// the walkers on an address space built in memory.
#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <map>
#include <random>

#include "corelib/analyses/diff.hpp"
#include "corelib/analyses/snapshot_io.hpp"
#include "corelib/answers/retained.hpp"
#include "corelib/blocks/dominators.hpp"
#include "corelib/blocks/heap.hpp"
#include "corelib/blocks/objgraph.hpp"
#include "corelib/debuginfo/types.hpp"
#include "corelib/dump/dump_kind.hpp"
#include "corelib/dump/elfcore.hpp"
#include "corelib/objects/containers.hpp"
#include "corelib/objects/filter.hpp"
#include "corelib/objects/objects.hpp"
#include "corelib/objects/walkers.hpp"
#include "harness.hpp"

namespace {

// A sparse address space of 8-byte words; unset words are unreadable.
class WordMemory : public lr::Memory {
 public:
  void set(uint64_t a, uint64_t v) { words_[a] = v; }
  const uint8_t* span(uint64_t, size_t) const override { return nullptr; }
  lr::Result<void> read(uint64_t addr, void* buf, size_t len) const override {
    auto* out = static_cast<uint8_t*>(buf);
    for (size_t i = 0; i < len; i += 8) {
      auto it = words_.find(addr + i);
      if (it == words_.end()) return lr::make_error(lr::Errc::kFault, "unmapped");
      std::memcpy(out + i, &it->second, std::min<size_t>(8, len - i));
    }
    return {};
  }
  std::string why_unreadable(uint64_t) const override { return "unmapped"; }

 private:
  std::map<uint64_t, uint64_t> words_;
};

// One contiguous readable range with a window, as a core's segment is: the
// hash walker's fast path runs over it (WordMemory only reaches step()).
class ByteMemory : public lr::Memory {
 public:
  ByteMemory(uint64_t base, size_t size) : base_(base), bytes_(size) {}
  void set(uint64_t a, uint64_t v) { std::memcpy(&bytes_.at(a - base_ + 7) - 7, &v, 8); }
  const uint8_t* span(uint64_t a, size_t n) const override {
    return a >= base_ && a - base_ <= bytes_.size() && n <= bytes_.size() - (a - base_)
               ? bytes_.data() + (a - base_)
               : nullptr;
  }
  lr::Result<void> read(uint64_t a, void* buf, size_t n) const override {
    const uint8_t* p = span(a, n);
    if (!p) return lr::make_error(lr::Errc::kFault, "unmapped");
    std::memcpy(buf, p, n);
    return {};
  }
  bool window(uint64_t a, Window* w) const override {
    if (a < base_ || a - base_ >= bytes_.size()) return false;
    w->start = base_;
    w->end = base_ + bytes_.size();
    w->data = bytes_.data();
    return true;
  }
  std::string why_unreadable(uint64_t) const override { return "unmapped"; }

 private:
  uint64_t base_;
  std::vector<uint8_t> bytes_;
};

}  // namespace

TEST_CASE("member paths parse and reject garbage", "[unit]") {
  auto p = lr::parse_member_path("a.b[3]->c_d");
  REQUIRE(p.ok());
  REQUIRE(p.value().size() == 5);
  CHECK(p.value()[0].name == "a");
  CHECK(p.value()[2].op == lr::PathStep::Op::kIndex);
  CHECK(p.value()[2].index == 3);
  CHECK(p.value()[3].op == lr::PathStep::Op::kDeref);
  for (const char* bad : {"", ".a", "a.", "a..b", "a[", "a[x]", "a[1", "1a", "a b", "a->",
                          "a[99999999999999999999]"}) {
    INFO(bad);
    CHECK_FALSE(lr::parse_member_path(bad).ok());
  }
}

TEST_CASE("where expressions check syntax", "[unit]") {
  CHECK(lr::Filter::check_syntax("refcount>1").ok());
  CHECK(lr::Filter::check_syntax("refcount >= 2 && name != \"x\" || (a.b==0x10)").ok());
  CHECK(lr::Filter::check_syntax("x==-3").ok());
  for (const char* bad : {"", "refcount>", ">1", "a==\"x", "a<\"x\"", "(a==1", "a==1 &&", "a=1",
                          "\"s\"", "a + \"s\" == 1", "f(1)", "a &&& b", "count(", "1 2"}) {
    INFO(bad);
    CHECK_FALSE(lr::Filter::check_syntax(bad).ok());
  }
}

TEST_CASE("list ring walk returns containers and checks prev links", "[unit]") {
  WordMemory m;
  const uint64_t head = 0x1000, off = 0x10;
  std::vector<uint64_t> objs = {0x2000, 0x3000, 0x4000};
  std::vector<uint64_t> links;
  for (auto o : objs) links.push_back(o + off);
  m.set(head, links[0]);
  m.set(head + 8, links.back());
  for (size_t i = 0; i < links.size(); ++i) {
    m.set(links[i], i + 1 < links.size() ? links[i + 1] : head);
    m.set(links[i] + 8, i ? links[i - 1] : head);
  }
  auto r = lr::walk_list(m, head, off);
  CHECK(r.stop == lr::WalkStop::kEnd);
  CHECK(r.objects == objs);
  CHECK(r.issue_count == 0);
  m.set(links[1] + 8, 0xbad);
  r = lr::walk_list(m, head, off);
  CHECK(r.objects == objs);
  CHECK(r.issue_count == 1);
}

TEST_CASE("walkers stop on NULL, poison and unreadable links", "[unit]") {
  WordMemory m;
  m.set(0x1000, 0x2000);
  m.set(0x1008, 0x2000);
  m.set(0x2000, 0);  // NULL inside a ring
  m.set(0x2008, 0x1000);
  auto r = lr::walk_list(m, 0x1000, 0);
  CHECK(r.stop == lr::WalkStop::kCorrupt);
  CHECK(r.objects.size() == 1);
  m.set(0x2000, 0xdead000000000100ull);
  CHECK(lr::walk_list(m, 0x1000, 0).stop == lr::WalkStop::kCorrupt);
  m.set(0x2000, 0x9000);  // unreadable
  r = lr::walk_list(m, 0x1000, 0);
  CHECK(r.stop == lr::WalkStop::kFault);
  CHECK(r.stop_detail.find("0x9000") != std::string::npos);
}

TEST_CASE("Brent cycle detection finds the exact loop for many shapes", "[unit]") {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 300; ++trial) {
    uint64_t mu = rng() % 40, lam = 1 + rng() % 40;
    WordMemory m;
    // Nodes at shuffled addresses so the loop is not address-ordered.
    std::vector<uint64_t> addr(mu + lam);
    for (size_t i = 0; i < addr.size(); ++i)
      addr[i] = 0x10000 + (i * 7919 % 1000) * 0x100 + i * 0x100000;
    for (size_t i = 0; i < addr.size(); ++i)
      m.set(addr[i] + 8, i + 1 < addr.size() ? addr[i + 1] : addr[mu]);
    auto r = lr::walk_chain(m, addr[0], 8);
    INFO("mu=" << mu << " lam=" << lam);
    REQUIRE(r.stop == lr::WalkStop::kCycle);
    CHECK(r.objects.size() == mu + lam);
    CHECK(r.objects == addr);
    CHECK(r.cycle_start == addr[mu]);
    CHECK(r.cycle_length == lam);
  }
}

TEST_CASE("walk limits bound every walker", "[unit]") {
  WordMemory m;
  for (uint64_t i = 0; i < 100; ++i) m.set(0x1000 + i * 0x10, 0x1000 + (i + 1) * 0x10);
  m.set(0x1000 + 100 * 0x10, 0);
  lr::WalkLimits lim;
  lim.max_nodes = 10;
  auto r = lr::walk_chain(m, 0x1000, 0, lim);
  CHECK(r.stop == lr::WalkStop::kLimit);
  CHECK(r.objects.size() == 10);
  CHECK(lr::walk_chain(m, 0x1000, 0).objects.size() == 101);
}

TEST_CASE("hash buckets keep walking past a broken chain", "[unit]") {
  WordMemory m;
  // 3 chain buckets: [a->b], [broken->unreadable], [c]
  m.set(0x100, 0x1000);
  m.set(0x108, 0x2000);
  m.set(0x110, 0x3000);
  m.set(0x1000, 0x1100);
  m.set(0x1100, 0);
  m.set(0x2000, 0x7777000);
  m.set(0x3000, 0);
  auto r = lr::walk_buckets(m, 0x100, 3, 8, lr::BucketKind::kChain, 0);
  CHECK(r.objects == std::vector<uint64_t>{0x1000, 0x1100, 0x2000, 0x3000});
  CHECK(r.stop == lr::WalkStop::kFault);
  CHECK(r.issue_count >= 1);
}

TEST_CASE("interleaved hash walks equal walking each bucket in turn", "[unit]") {
  // Random tables of chain buckets with empty buckets, long chains, loops
  // and unreadable links; the result must be the bucket-by-bucket walk.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    WordMemory m;
    const uint64_t base = 0x100000, nb = 1 + rng() % 70;
    std::vector<uint64_t> expect;
    uint64_t next_node = 0x10000000, cycles = 0, faults = 0;
    for (uint64_t b = 0; b < nb; ++b) {
      uint64_t len = rng() % 5 == 0 ? 0 : rng() % (rng() % 7 == 0 ? 60 : 6);
      std::vector<uint64_t> nodes;
      for (uint64_t i = 0; i < len; ++i) nodes.push_back(next_node += 0x40 + (rng() % 4) * 0x1000);
      m.set(base + b * 8, nodes.empty() ? 0 : nodes[0]);
      int shape = len ? rng() % 8 : 0;
      for (size_t i = 0; i < nodes.size(); ++i) {
        uint64_t nx = i + 1 < nodes.size() ? nodes[i + 1] : 0;
        if (i + 1 == nodes.size() && shape == 1) nx = nodes[rng() % nodes.size()];  // loop
        if (i + 1 == nodes.size() && shape == 2) nx = 0xbad0000;                    // unreadable
        m.set(nodes[i] + 8, nx);
      }
      expect.insert(expect.end(), nodes.begin(), nodes.end());
      cycles += shape == 1;
      faults += shape == 2;
    }
    auto r = lr::walk_buckets(m, base, nb, 8, lr::BucketKind::kChain, 8);
    INFO("trial " << trial);
    CHECK(r.objects == expect);
    CHECK(r.issue_count == cycles + faults);
    if (cycles + faults == 0) CHECK(r.stop == lr::WalkStop::kEnd);
    lr::WalkLimits lim;
    lim.max_nodes = expect.size() / 2;
    auto part = lr::walk_buckets(m, base, nb, 8, lr::BucketKind::kChain, 8, lim);
    if (lim.max_nodes < expect.size()) {
      CHECK(part.stop == lr::WalkStop::kLimit);
      CHECK(part.objects == std::vector<uint64_t>(expect.begin(), expect.begin() + lim.max_nodes));
    }
  }
}

TEST_CASE("hlist and list_head tables over a window equal their buckets walked one by one",
          "[unit]") {
  // Enough buckets to fill every lane; chains with broken back links, loops,
  // poison and links out of the readable range. Each table must give the
  // concatenation of walk_hlist/walk_list on its buckets, walked over the
  // same words without a window (the slow step only).
  std::mt19937 rng(11);
  const uint64_t base = 0x200000;
  for (int trial = 0; trial < 40; ++trial) {
    const bool ring = trial % 2;
    const uint64_t nb = 1 + rng() % 300, bsz = ring ? 16 : 8, member = 8;
    ByteMemory m(base, 1 << 20);
    WordMemory slow;  // the same words without a window: every step takes step_slow()
    auto set = [&](uint64_t a, uint64_t v) {
      m.set(a, v);
      slow.set(a, v);
    };
    uint64_t next_node = base + 0x10000;
    std::vector<uint64_t> expect;
    uint64_t broken = 0, issues = 0;
    for (uint64_t b = 0; b < nb; ++b) {
      const uint64_t head = base + b * bsz;
      uint64_t len = rng() % 6 == 0 ? 0 : rng() % (rng() % 9 == 0 ? 40 : 6);
      std::vector<uint64_t> links;
      for (uint64_t i = 0; i < len; ++i) links.push_back((next_node += 0x30) + member);
      int shape = len ? rng() % 10 : 0;
      const uint64_t end = ring ? head : 0;
      set(head, links.empty() ? end : links[0]);
      if (ring) set(head + 8, links.empty() ? head : links.back());
      for (size_t i = 0; i < links.size(); ++i) {
        uint64_t nx = i + 1 < links.size() ? links[i + 1] : end;
        uint64_t back = i == 0 ? head : links[i - 1];
        if (i + 1 == links.size() && shape == 1) nx = links[rng() % links.size()];  // loop
        if (i + 1 == links.size() && shape == 2) nx = 0x7777000;                    // unreadable
        if (i + 1 == links.size() && shape == 3) nx = 0xdead000000000100ull;        // poison
        if (shape == 4 && i == links.size() / 2) back ^= 0x40;  // broken back link
        set(links[i], nx);
        set(links[i] + 8, back);
      }
      auto one = ring ? lr::walk_list(slow, head, member) : lr::walk_hlist(slow, head, member);
      expect.insert(expect.end(), one.objects.begin(), one.objects.end());
      broken += one.stop != lr::WalkStop::kEnd;
      issues += one.issue_count + (one.stop != lr::WalkStop::kEnd);
    }
    auto r = lr::walk_buckets(m, base, nb, bsz,
                              ring ? lr::BucketKind::kListHead : lr::BucketKind::kHlist, member);
    INFO("trial " << trial << (ring ? " list_head" : " hlist"));
    CHECK(r.objects == expect);
    CHECK((r.stop == lr::WalkStop::kEnd) == (broken == 0));
    CHECK(r.issue_count == issues);
    lr::WalkLimits lim;
    lim.max_nodes = expect.size() / 3;
    auto part = lr::walk_buckets(
        m, base, nb, bsz, ring ? lr::BucketKind::kListHead : lr::BucketKind::kHlist, member, lim);
    if (lim.max_nodes < expect.size()) {
      CHECK(part.stop == lr::WalkStop::kLimit);
      CHECK(part.objects == std::vector<uint64_t>(expect.begin(), expect.begin() + lim.max_nodes));
    }
  }
}

TEST_CASE("a huge bucket count over unreadable memory stops at the first bad bucket", "[unit]") {
  WordMemory m;
  m.set(0x100, 0x1000);
  m.set(0x108, 0);
  m.set(0x110, 0);
  m.set(0x1000, 0);
  auto r = lr::walk_buckets(m, 0x100, uint64_t{1} << 40, 8, lr::BucketKind::kChain, 0);
  CHECK(r.objects == std::vector<uint64_t>{0x1000});
  CHECK(r.stop == lr::WalkStop::kFault);
  CHECK(r.faulted_buckets == 1);
  CHECK(r.stop_detail.find("bucket array is not readable past 3 of 1099511627776") !=
        std::string::npos);
  CHECK(r.stop_addr == 0x118);
}

TEST_CASE("fields outside their object (corrupt DWARF) are refused, not read", "[unit]") {
  lr::Type i32;
  i32.kind = lr::TypeKind::kInt;
  i32.size = 4;
  i32.is_signed = true;
  lr::Type s;
  s.kind = lr::TypeKind::kStruct;
  s.name = "bad";
  s.size = 16;
  s.members = {{"ok", 8, 0, 0, &i32}, {"past", 40, 0, 0, &i32}, {"bits", 15, 6, 4, &i32}};
  CHECK(lr::resolve_path(&s, "ok").ok());
  auto r = lr::resolve_path(&s, "past");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == lr::Errc::kBadFormat);
  CHECK_FALSE(lr::resolve_path(&s, "bits").ok());  // bits 6..9 of byte 15 spill past 16
  uint8_t bytes[16] = {};
  bytes[8] = 7;
  lr::ValueNode n = lr::value_tree(bytes, sizeof bytes, &s);
  REQUIRE(n.children.size() == 3);
  CHECK(n.children[0].value.s == 7);
  CHECK(n.children[1].value.kind == lr::FieldValue::Kind::kError);
  CHECK(n.children[2].value.kind == lr::FieldValue::Kind::kError);
}

TEST_CASE("value trees stay bounded for nested arrays of empty elements", "[unit]") {
  lr::Type empty;
  empty.kind = lr::TypeKind::kStruct;
  empty.size = 0;
  std::vector<lr::Type> levels(8);
  const lr::Type* inner = &empty;
  for (auto& a : levels) {
    a.kind = lr::TypeKind::kArray;
    a.count = 4096;
    a.size = 0;
    a.target = inner;
    inner = &a;
  }
  lr::TreeLimits lim;
  lim.max_array = 4096;
  lim.max_nodes = 5000;
  uint8_t b = 0;
  lr::ValueNode n = lr::value_tree(&b, 1, inner, lim);
  std::function<size_t(const lr::ValueNode&)> count = [&](const lr::ValueNode& v) {
    size_t c = 1;
    for (const auto& ch : v.children) c += count(ch);
    return c;
  };
  CHECK(count(n) <= lim.max_nodes + 16);
}

// ---- trees and xarrays ---------------------------------------------------------
// rb_node layout: parent|colour at 0, right at 8, left at 16; nodes 0x100 apart.
namespace {
struct Tree {
  WordMemory m;
  lr::TreeShape sh;
  Tree() {
    sh.left_off = 16;
    sh.right_off = 8;
    sh.has_parent = true;
    sh.parent_off = 0;
    sh.parent_mask = ~uint64_t{3};
    sh.node_size = 24;
  }
  void node(uint64_t a, uint64_t parent, uint64_t left, uint64_t right, uint64_t colour = 1) {
    m.set(a, parent | colour);
    m.set(a + 8, right);
    m.set(a + 16, left);
  }
};
}  // namespace

TEST_CASE("tree walk: in order, parent links checked, cycles and depth bounded", "[unit]") {
  Tree t;
  // 0x2000 is the root; in order: 0x1000 0x1800 0x2000 0x3000 0x3800
  t.node(0x2000, 0, 0x1000, 0x3000);
  t.node(0x1000, 0x2000, 0, 0x1800);
  t.node(0x1800, 0x1000, 0, 0);
  t.node(0x3000, 0x2000, 0, 0x3800);
  t.node(0x3800, 0x3000, 0, 0);
  auto r = lr::walk_tree(t.m, 0x2000, t.sh, 0x10);
  CHECK(r.ok());
  CHECK(r.objects == std::vector<uint64_t>{0xff0, 0x17f0, 0x1ff0, 0x2ff0, 0x37f0});
  CHECK(r.issue_count == 0);
  // A broken parent link is an issue; the walk goes on.
  t.node(0x1800, 0x3000, 0, 0);
  r = lr::walk_tree(t.m, 0x2000, t.sh, 0);
  CHECK(r.ok());
  CHECK(r.issue_count == 1);
  CHECK(r.issues[0].addr == 0x1800);
  // A child pointing back up: a cycle, each node once.
  t.node(0x3800, 0x3000, 0x2000, 0);
  r = lr::walk_tree(t.m, 0x2000, t.sh, 0);
  CHECK(r.stop == lr::WalkStop::kCycle);
  CHECK(r.objects.size() <= 5);
  // An unreadable child: fault, naming it.
  t.node(0x3800, 0x3000, 0x9000, 0);
  r = lr::walk_tree(t.m, 0x2000, t.sh, 0);
  CHECK(r.stop == lr::WalkStop::kFault);
  CHECK(r.stop_detail.find("0x9000") != std::string::npos);
  // A long left spine is cut at the depth bound (corrupt), never a hang.
  Tree deep;
  for (uint64_t i = 0; i < 1000; ++i)
    deep.node(0x10000 + i * 0x20, i ? 0x10000 + (i - 1) * 0x20 : 0, 0x10000 + (i + 1) * 0x20, 0);
  deep.node(0x10000 + 1000 * 0x20, 0x10000 + 999 * 0x20, 0, 0);
  r = lr::walk_tree(deep.m, 0x10000, deep.sh, 0);
  CHECK(r.stop == lr::WalkStop::kCorrupt);
  // The limit holds.
  lr::WalkLimits lim;
  lim.max_nodes = 2;
  r = lr::walk_tree(t.m, 0x1800, t.sh, 0, lim);
  CHECK(r.objects.size() <= 2);
}

TEST_CASE("xarray walk: entries in index order, values skipped, corrupt nodes refused", "[unit]") {
  WordMemory m;
  lr::XaShape sh;  // shift@0 offset@1 parent@8 slots@40, 4 slots
  sh.chunk = 4;
  sh.chunk_shift = 2;
  sh.slots_off = 40;
  sh.node_size = 40 + 4 * 8;
  auto node = [&](uint64_t a, unsigned shift, unsigned offset, uint64_t parent,
                  std::vector<uint64_t> slots) {
    m.set(a, shift | (offset << 8));
    m.set(a + 8, parent);
    m.set(a + 16, 0);
    m.set(a + 24, 0);
    m.set(a + 32, 0);
    for (size_t i = 0; i < 4; ++i) m.set(a + 40 + i * 8, i < slots.size() ? slots[i] : 0);
  };
  node(0x1000, 2, 0, 0, {0x2000 | 2, 0, 0x3000 | 2, (5 << 1) | 1});
  node(0x2000, 0, 0, 0x1000, {0xa000, (7 << 1) | 1, 0xa100, 0});
  node(0x3000, 0, 2, 0x1000, {0, 0xa200, (1 << 2) | 2 /* sibling */, 0xa300});
  auto r = lr::walk_xarray(m, 0x1000 | 2, sh);
  CHECK(r.ok());
  CHECK(r.objects == std::vector<uint64_t>{0xa000, 0xa100, 0xa200, 0xa300});
  CHECK(r.skipped == 2);
  CHECK(r.issue_count == 0);
  // A single pointer at the head is entry 0; a value head is no object.
  CHECK(lr::walk_xarray(m, 0xa000, sh).objects == std::vector<uint64_t>{0xa000});
  CHECK(lr::walk_xarray(m, 0x7, sh).objects.empty());
  // A child whose offset or parent does not fit its slot is not descended.
  node(0x3000, 0, 1, 0x1000, {0, 0xa200, 0, 0xa300});
  r = lr::walk_xarray(m, 0x1000 | 2, sh);
  CHECK(r.objects == std::vector<uint64_t>{0xa000, 0xa100});
  CHECK(r.issue_count == 1);
  // A node that points to itself: a cycle (or a bad shift), never a hang.
  node(0x3000, 0, 2, 0x1000, {0x1000 | 2, 0, 0, 0});
  r = lr::walk_xarray(m, 0x1000 | 2, sh);
  CHECK(r.objects.size() <= 2);
  CHECK(r.issue_count + (r.ok() ? 0 : 1) >= 1);
  // A layout that cannot hold its slots is refused.
  lr::XaShape bad = sh;
  bad.node_size = 16;
  CHECK(lr::walk_xarray(m, 0x1000 | 2, bad).stop == lr::WalkStop::kCorrupt);
}

// The walk's chunk index keeps a chunk in 8 bytes: every size it can code
// comes back exactly, the ones it cannot (a heap chunk over 8 MiB, a mmapped
// one over 2 GiB, an odd pointer) through its side table, and the words
// sort as their pointers do.
TEST_CASE("chunk index: sizes and pointers come back exactly, in address order", "[unit]") {
  std::vector<lr::HeapChunk> in = {
      lr::HeapChunk::make(0x55550000a010, 24, false),
      lr::HeapChunk::make(0x55550000a030, 8 * 1024 * 1024 - 8, false),  // the largest coded
      lr::HeapChunk::make(0x555500c0a040, 8 * 1024 * 1024 + 8, false),  // side table
      lr::HeapChunk::make(0x7f0000000010, 4096 - 16, true),
      lr::HeapChunk::make(0x7f0100000010, (uint64_t{3} << 30) - 16, true),  // side table
      lr::HeapChunk::make(0x7f0200000010, (uint64_t{2} << 30) - 4096 - 16, true),
      lr::HeapChunk::make(0x55550000a108, 40, false),  // 8-aligned: side table
      lr::HeapChunk::make(0x7ffffffff010, lr::kMaxChunkUsable, true),
  };
  lr::ChunkIndex ix;
  // Appended in two runs, as a walk appends heaps and then mmapped chunks.
  for (size_t i : {3, 4, 5, 7, 0, 1, 6, 2}) ix.push_back(in[i]);
  ix.sort();
  std::vector<lr::HeapChunk> want = in;
  std::sort(want.begin(), want.end(),
            [](const lr::HeapChunk& a, const lr::HeapChunk& b) { return a.user < b.user; });
  REQUIRE(ix.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(i);
    CHECK(ix[i].user == want[i].user);
    CHECK(ix[i].usable() == want[i].usable());
    CHECK(ix[i].mmapped() == want[i].mmapped());
  }
  ix.filter([](const lr::HeapChunk& c) { return !c.mmapped(); });
  CHECK(ix.size() == 4);
  for (const auto& c : ix) CHECK(!c.mmapped());
  CHECK(ix[3].usable() == 8 * 1024 * 1024 + 8);
}

// The engine tells dumps apart by their first bytes, for every front end:
// an ELF core, a kdump file, a text dump a target registered, compression.
TEST_CASE("dump kinds: ELF cores, kdump files, registered text dumps, compression", "[unit]") {
  using lr::DumpKind;
  std::string elf(64, '\0');
  elf.replace(0, 4, "\177ELF");
  elf[16] = 4;  // ET_CORE
  CHECK(lr::identify_dump_head(elf, -1, 0).kind == DumpKind::kProcessCore);
  CHECK(lr::identify_dump_head(elf, -1, 0).name() == "core");
  elf[16] = 2;  // ET_EXEC: an executable is no dump
  CHECK(lr::identify_dump_head(elf, -1, 0).kind == DumpKind::kNone);
  CHECK(lr::identify_dump_head("KDUMP   \1\0", -1, 0).name() == "vmcore");
  CHECK(lr::identify_dump_head("makedumpfile", -1, 0).kind == DumpKind::kKernelDump);
  // GlusterFS's statedump, registered by its target (register_targets).
  const auto sd = lr::identify_dump_head("DUMP-START-TIME: 2026-11-26 10:00:00", -1, 0);
  CHECK(sd.kind == DumpKind::kText);
  CHECK(sd.name() == "statedump");
  const auto z = lr::identify_dump_head(std::string("\x28\xb5\x2f\xfd\0\0", 6), -1, 0);
  CHECK(z.compression == lr::Compression::kZstd);
  CHECK(z.kind == DumpKind::kNone);
  CHECK(lr::identify_dump_head("{\"schema\"", -1, 0).name().empty());
  CHECK(lr::identify_dump_head("", -1, 0).kind == DumpKind::kNone);
}

TEST_CASE("text snapshots: saved ones and registered text dumps, nothing else", "[unit]") {
  lr::Snapshot s;
  s.source = "a.core";
  s.kind = "core";
  s.classes.push_back({"heap", "48", 3, 144});
  s.objects.push_back({"inode@0x10", "itable fuse active", 2, "fuse=2", "inode"});
  const std::string saved = lrtest::tmp_dir() + "/saved.json";
  lrtest::write_file(saved, lr::snapshot_json(s).dump());
  auto back = lr::read_text_snapshot(saved);
  REQUIRE(back.ok());
  CHECK(back->classes.size() == 1);
  CHECK(back->classes[0].bytes == 144);
  CHECK(back->objects[0].kind == "inode");
  // GlusterFS's statedump goes to its target's reader (register_targets).
  const std::string sd = lrtest::tmp_dir() + "/glusterdump.1.dump.1";
  lrtest::write_file(sd,
                     "DUMP-START-TIME: 2026-11-26 10:00:00.000000\n\nDUMP-END-TIME: 2026-11-26 "
                     "10:00:01.000000\n");
  auto g = lr::read_text_snapshot(sd);
  REQUIRE(g.ok());
  CHECK(g->kind == "statedump");
  const std::string junk = lrtest::tmp_dir() + "/notes.txt";
  lrtest::write_file(junk, "just some notes\n");
  auto j = lr::read_text_snapshot(junk);
  REQUIRE_FALSE(j.ok());
  CHECK(j.error().message == junk + ": neither a saved snapshot nor a text dump");
  lrtest::write_file(junk, "{ \"schema\": ");
  REQUIRE_FALSE(lr::read_text_snapshot(junk).ok());
}

// The object graph on memory made by hand: interior pointers count, a word
// one past an object does not, a self-reference is not a reference, an
// object whose contents are not live keeps nothing alive, cycles are
// referenced but not reached, unreadable roots are counted and skipped.
TEST_CASE("object graph: reachability, referrers and chains", "[unit][objgraph]") {
  const uint64_t base = 0xffff888000000000ull;
  ByteMemory mem(base, 64 << 10);
  auto at = [&](uint64_t off) { return base + off; };
  enum { A, B, C, D, E, F, G, H };
  std::vector<lr::GraphObject> objs = {
      {at(0x1000), 64}, {at(0x1100), 64},   {at(0x1200), 64},        {at(0x1300), 64},
      {at(0x1400), 64}, {at(0x2000), 4096}, {at(0x4000), 64, false}, {at(0x4100), 64}};
  mem.set(at(0x8000), at(0x1000));       // root -> A
  mem.set(at(0x8008), at(0x1100) + 24);  // root -> inside B
  mem.set(at(0x8010), at(0x1140));       // one past B: nothing
  mem.set(at(0x1008), at(0x1200));       // A -> C
  mem.set(at(0x1310), at(0x1400));       // D -> E
  mem.set(at(0x1408), at(0x1300) + 8);   // E -> D (a cycle)
  mem.set(at(0x2010), at(0x2000));       // F -> F
  mem.set(at(0x4000), at(0x4100));       // G (not live) -> H
  std::vector<lr::GraphRoot> roots = {{at(0x8000), at(0x8100), 7},
                                      {at(0x20000), at(0x21000), 8}};  // outside the memory
  auto g = lr::ObjectGraph::build(mem, objs, roots, {{at(0x1200) + 3, 9, 2}});
  REQUIRE(g.ok());
  const lr::ObjectGraph& x = *g.value();
  CHECK(x.find(at(0x1100) + 63) == B);
  CHECK(x.find(at(0x1140)) == SIZE_MAX);
  auto seen = x.reachable();
  using OG = lr::ObjectGraph;
  CHECK(seen[A] == (OG::kReached | OG::kReferenced));
  CHECK(seen[B] == (OG::kReached | OG::kReferenced));
  CHECK(seen[C] == (OG::kReached | OG::kReferenced));
  CHECK(seen[D] == OG::kReferenced);
  CHECK(seen[E] == OG::kReferenced);
  CHECK(seen[F] == 0);
  CHECK(seen[G] == 0);
  CHECK(seen[H] == 0);
  // C: from A's word, and from the value root (a register, say).
  auto rc = x.referrers(C);
  REQUIRE(rc.size() == 2);
  CHECK(rc[0].value_root == 0);
  CHECK(rc[0].from == 2);
  CHECK(rc[1].object == A);
  CHECK(rc[1].from == at(0x1008));
  auto rb = x.referrers(B);
  REQUIRE(rb.size() == 1);
  CHECK(rb[0].root != lr::GraphRef::kNone);
  CHECK(x.roots()[rb[0].root].tag == 7);
  CHECK(rb[0].value == at(0x1100) + 24);
  auto ch = x.chain(D, 4);
  CHECK(ch.empty());
  auto ce = x.chain(C, 4);
  REQUIRE(ce.size() == 1);  // the value root points at C directly
  CHECK(ce[0].value_root == 0);
  CHECK(x.ref_count(D) == 1);
  CHECK(x.stats().unreadable_bytes == 0x1000);
  // Objects that overlap are refused; so is a graph past its bound.
  auto bad = lr::ObjectGraph::build(mem, {{at(0x1000), 64}, {at(0x1020), 64}}, {}, {});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("overlap") != std::string::npos);
  lr::ObjectGraphOptions small;
  small.max_refs = 2;
  auto full = lr::ObjectGraph::build(mem, objs, roots, {}, small);
  REQUIRE_FALSE(full.ok());
  CHECK(full.error().message.find("more than 2 references") != std::string::npos);
}

// A page where every word points into an object: each word is one
// reference, found once, and the scan stays linear.
TEST_CASE("object graph: a pointer-dense page", "[unit][objgraph]") {
  const uint64_t base = 0xffff888000000000ull;
  ByteMemory mem(base, 64 << 10);
  for (uint64_t w = 0; w < 4096; w += 8) mem.set(base + 0x8000 + w, base + 0x1000 + (w % 64));
  auto g =
      lr::ObjectGraph::build(mem, {{base + 0x1000, 64}}, {{base + 0x8000, base + 0x9000, 0}}, {});
  REQUIRE(g.ok());
  CHECK(g.value()->stats().root_refs == 512);
  CHECK(g.value()->referrers(0).size() == 512);
  CHECK(g.value()->chain(0, 1).size() == 1);
}

// The growth verdict on account classes alone: growth of the allocator's
// own overhead is said as such, never "leaked grew +0 bytes: a leak".
TEST_CASE("growth verdict: overhead is not a leak of +0 bytes", "[unit][diff]") {
  auto snap = [](int64_t live, int64_t leaked, int64_t free_, int64_t overhead) {
    lr::Snapshot s;
    s.kind = "core";
    for (auto [name, bytes] : {std::pair<const char*, int64_t>{"live", live},
                               {"leaked", leaked},
                               {"free", free_},
                               {"overhead", overhead},
                               {"unknown", 0}})
      s.classes.push_back({"account", name, 1, bytes});
    return s;
  };
  const int64_t mib = 1 << 20;
  CHECK(lr::growth_verdict(snap(10 * mib, 0, mib, mib), snap(10 * mib, 0, mib, 5 * mib)).kind ==
        "overhead");
  CHECK(lr::growth_verdict(snap(10 * mib, 0, mib, mib), snap(10 * mib, 4 * mib, mib, mib)).kind ==
        "leak");
  CHECK(lr::growth_verdict(snap(10 * mib, 0, mib, mib), snap(14 * mib, 0, mib, mib)).kind ==
        "held");
}

namespace {

// One ELF note: name, type, descriptor, each padded to 4 bytes.
void add_note(std::string& out, const std::string& name, uint32_t type, const std::string& desc) {
  const uint32_t hdr[3] = {static_cast<uint32_t>(name.size() + 1),
                           static_cast<uint32_t>(desc.size()), type};
  out.append(reinterpret_cast<const char*>(hdr), sizeof hdr);
  out.append(name).push_back('\0');
  out.resize((out.size() + 3) & ~size_t{3}, '\0');
  out.append(desc);
  out.resize((out.size() + 3) & ~size_t{3}, '\0');
}

}  // namespace

// A kernel-written aarch64 core (what a real arm64 machine gives) has one
// NT_PRSTATUS per thread, each followed by that thread's NT_ARM_TLS;
// qemu-aarch64's cores (the integration tests) have no NT_ARM_TLS.
TEST_CASE("aarch64 cores: registers and TPIDR_EL0 from NT_PRSTATUS and NT_ARM_TLS", "[unit]") {
  std::string notes;
  for (int t = 0; t < 2; ++t) {
    std::string ps(112 + 34 * 8 + 8, '\0');  // struct elf_prstatus on arm64: 392 bytes
    const int32_t pid = 4000 + t;
    const int16_t sig = 6;
    std::memcpy(&ps[12], &sig, 2);
    std::memcpy(&ps[32], &pid, 4);
    for (uint64_t r = 0; r < 34; ++r) {
      const uint64_t v = 0x1000 * (t + 1) + r;  // x0.. x30, sp (31), pc (32), pstate
      std::memcpy(&ps[112 + r * 8], &v, 8);
    }
    add_note(notes, "CORE", NT_PRSTATUS, ps);
    const uint64_t tp = 0x7f0000001000ull + 0x100000ull * t;
    add_note(notes, "LINUX", NT_ARM_TLS, std::string(reinterpret_cast<const char*>(&tp), 8));
  }
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_CORE;
  eh.e_machine = EM_AARCH64;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = sizeof eh;
  eh.e_ehsize = sizeof eh;
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 1;
  Elf64_Phdr ph{};
  ph.p_type = PT_NOTE;
  ph.p_offset = sizeof eh + sizeof ph;
  ph.p_filesz = notes.size();
  std::string img(reinterpret_cast<const char*>(&eh), sizeof eh);
  img.append(reinterpret_cast<const char*>(&ph), sizeof ph);
  img += notes;
  auto c = lr::CoreFile::open_memory(reinterpret_cast<const uint8_t*>(img.data()), img.size(),
                                     "arm64.core");
  REQUIRE(c.ok());
  const auto& th = c.value()->threads();
  CHECK(c.value()->machine() == EM_AARCH64);
  REQUIRE(th.size() == 2);
  for (int t = 0; t < 2; ++t) {
    INFO(t);
    CHECK(th[t].tid == 4000 + t);
    CHECK(th[t].signo == 6);
    CHECK(th[t].nregs() == 34);
    CHECK(th[t].sp() == 0x1000u * (t + 1) + 31);
    CHECK(th[t].pc() == 0x1000u * (t + 1) + 32);
    CHECK(th[t].tp == 0x7f0000001000ull + 0x100000ull * t);
  }
  CHECK(std::string(lr::register_names(EM_AARCH64)[30]) == "x30");
  // A note too small for 34 registers is a warning, not a thread.
  std::string small = img;
  const uint32_t shrunk = 112 + 27 * 8;
  std::memcpy(&small[sizeof eh + sizeof ph + 4], &shrunk, 4);
  auto s2 = lr::CoreFile::open_memory(reinterpret_cast<const uint8_t*>(small.data()), small.size(),
                                      "small.core");
  REQUIRE(s2.ok());
  CHECK(s2.value()->threads().empty());
  const auto& w = s2.value()->warnings();
  CHECK(std::any_of(w.begin(), w.end(), [](const std::string& m) {
    return m == "NT_PRSTATUS note too small (328 bytes)";
  }));
}

// A refcount type registered as counting from zero (the kernel's file_ref_t)
// reads as the count through every path: descend_refcount, IntField and
// format_scalar; values from the released mark up read 0.
TEST_CASE("a zero-based refcount type reads as its count", "[unit]") {
  using namespace lr;
  Type counter{};
  counter.kind = TypeKind::kInt;
  counter.name = "long";
  counter.size = 8;
  counter.is_signed = true;
  Type atomic{};
  atomic.kind = TypeKind::kStruct;
  atomic.name = "atomic64_t";
  atomic.size = 8;
  atomic.members = {Member{"counter", 0, 0, 0, &counter}};
  Type anon{};
  anon.kind = TypeKind::kStruct;
  anon.size = 8;
  anon.members = {Member{"refcnt", 0, 0, 0, &atomic}};
  Type ref{};
  ref.kind = TypeKind::kTypedef;
  ref.name = "lr_test_ref_t";
  ref.size = 8;
  ref.target = &anon;
  Type file{};
  file.kind = TypeKind::kStruct;
  file.name = "file";
  file.size = 16;
  file.members = {Member{"pad", 0, 0, 0, &counter}, Member{"f_ref", 8, 0, 0, &ref}};
  auto plain = resolve_refcount(&file, "f_ref");
  REQUIRE(plain.ok());
  CHECK(!plain.value().enc.zero_based);  // not registered yet: the raw value
  register_refcount_encoding("lr_test_ref_t", {true, 0xc000000000000000});
  auto loc = resolve_refcount(&file, "f_ref");
  REQUIRE(loc.ok());
  CHECK(loc.value().offset == 8);
  CHECK(loc.value().enc.zero_based);
  IntField f = IntField::of(loc.value());
  uint8_t obj[16] = {};
  auto at = [&](uint64_t v) {
    std::memcpy(obj + 8, &v, 8);
    return f.load(obj);
  };
  CHECK(at(0) == 1);
  CHECK(at(2) == 3);
  CHECK(at(0xc000000000000000) == 0);  // FILE_REF_RELEASED
  CHECK(at(0xffffffffffffffff) == 0);  // FILE_REF_NOREF
  std::memcpy(obj + 8, "\x04\0\0\0\0\0\0\0", 8);
  CHECK(format_scalar(obj, loc.value()).s == 5);
  // A 32-bit one (rcuref_t): the mark in its own width.
  RefEncoding r32{true, 0xc0000000};
  CHECK(r32.decode(-1, 4) == 0);
  CHECK(r32.decode(7, 4) == 8);
}

TEST_CASE("retained sizes: 4 bytes a node, and 4 GiB or more kept aside", "[unit][retained]") {
  lr::NodeBytes b;
  b.assign(3);
  b.set(0, 100), b.set(1, (uint64_t{1} << 32) - 2);
  CHECK(b.fits(0));
  CHECK(b.fits(1));
  b.add(1, 1);  // UINT32_MAX itself is the mark: kept aside
  CHECK_FALSE(b.fits(1));
  CHECK(b[1] == (uint64_t{1} << 32) - 1);
  b.add(2, b[0]), b.add(2, b[1]), b.add(2, uint64_t{5} << 40);
  CHECK(b[2] == 100 + (uint64_t{1} << 32) - 1 + (uint64_t{5} << 40));
  CHECK(b[0] == 100);
  b.set(1, 7);  // back under: said in 4 bytes again
  CHECK(b.fits(1));
  CHECK(b[1] == 7);
}

namespace {

// A graph as adjacency lists, for the dominator algorithm.
struct AdjGraph {
  std::vector<std::vector<uint32_t>> succ;
  explicit AdjGraph(size_t n) : succ(n) {}
  void edge(uint32_t a, uint32_t b) { succ[a].push_back(b); }
  std::vector<uint32_t> idom(uint32_t root, std::vector<uint32_t>* order = nullptr) const {
    return lr::immediate_dominators(
        succ.size(), root, [&](uint32_t v) { return std::span<const uint32_t>(succ[v]); },
        [](uint32_t, uint32_t) { return true; }, order);
  }
};

// Dominators by definition: d dominates v when removing d leaves v
// unreachable from the root (quadratic; small graphs).
std::vector<uint32_t> idom_by_definition(const AdjGraph& g, uint32_t root) {
  const size_t n = g.succ.size();
  auto reach = [&](uint32_t removed) {
    std::vector<char> seen(n, 0);
    std::vector<uint32_t> todo;
    if (removed != root) seen[root] = 1, todo.push_back(root);
    while (!todo.empty()) {
      uint32_t v = todo.back();
      todo.pop_back();
      for (uint32_t w : g.succ[v])
        if (w != removed && !seen[w]) seen[w] = 1, todo.push_back(w);
    }
    return seen;
  };
  const auto all = reach(UINT32_MAX);
  std::vector<std::vector<char>> without(n);
  for (uint32_t d = 0; d < n; ++d) without[d] = reach(d);
  std::vector<uint32_t> out(n, lr::kNoNode);
  out[root] = root;
  for (uint32_t v = 0; v < n; ++v) {
    if (v == root || !all[v]) continue;
    // Strict dominators of v; the immediate one is dominated by all others.
    std::vector<uint32_t> doms;
    for (uint32_t d = 0; d < n; ++d)
      if (d != v && all[d] && !without[d][v]) doms.push_back(d);
    for (uint32_t d : doms) {
      bool below_all = true;
      for (uint32_t e : doms)
        if (e != d && without[e][d]) below_all = false;  // e does not dominate d
      if (below_all) out[v] = d;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("dominators: small graphs against the definition", "[unit][dominators]") {
  std::mt19937 rng(20261128);
  for (int round = 0; round < 300; ++round) {
    const size_t n = 2 + rng() % 24;
    AdjGraph g(n);
    const size_t edges = rng() % (3 * n);
    for (size_t e = 0; e < edges; ++e)
      g.edge(static_cast<uint32_t>(rng() % n), static_cast<uint32_t>(rng() % n));
    INFO("round " << round);
    CHECK(g.idom(0) == idom_by_definition(g, 0));
  }
}

TEST_CASE("dominators: wide nodes, repeated edges and self loops against the definition",
          "[unit][dominators]") {
  // A node's tree edges past its 255th successor are kept aside by number
  // when the preorder is made again; repeated and self edges are no
  // semidominator's.
  std::mt19937 rng(20261129);
  for (int round = 0; round < 40; ++round) {
    const size_t n = 8 + rng() % 40;
    AdjGraph g(n);
    for (uint32_t v = 0; v < 3; ++v)
      for (int k = 0; k < 300 + static_cast<int>(rng() % 400); ++k)
        g.edge(v, k < 290 ? v : static_cast<uint32_t>(rng() % n));  // most of them to itself
    for (size_t e = 0, m = rng() % (3 * n); e < m; ++e) {
      const uint32_t a = static_cast<uint32_t>(rng() % n), b = static_cast<uint32_t>(rng() % n);
      g.edge(a, b), g.edge(a, b);
    }
    std::vector<uint32_t> order;
    const auto idom = g.idom(0, &order);
    INFO("round " << round);
    CHECK(idom == idom_by_definition(g, 0));
    for (size_t i = 1; i < order.size(); ++i) CHECK(idom[order[i]] != lr::kNoNode);
  }
}

TEST_CASE("dominators: a diamond, a cycle and unreachable nodes", "[unit][dominators]") {
  AdjGraph g(7);
  g.edge(0, 1), g.edge(1, 2), g.edge(1, 3), g.edge(2, 4), g.edge(3, 4), g.edge(4, 1);
  g.edge(5, 6);  // not reached from 0
  std::vector<uint32_t> order;
  const auto idom = g.idom(0, &order);
  CHECK(idom == std::vector<uint32_t>{0, 0, 1, 1, 1, lr::kNoNode, lr::kNoNode});
  CHECK(order.size() == 5);
}

TEST_CASE("dominators: a chain of two million nodes needs no deep stack", "[unit][dominators]") {
  const size_t n = 2'000'000;
  AdjGraph g(n);
  for (uint32_t v = 0; v + 1 < n; ++v) g.edge(v, v + 1);
  const auto idom = g.idom(0);
  bool chain = true;
  for (uint32_t v = 1; v < n; ++v) chain &= idom[v] == v - 1;
  CHECK(chain);
}

TEST_CASE("dominators: the unreached part is entered once per source component",
          "[unit][dominators]") {
  // 0 reached; 1 <-> 2 -> 3 <-> 4 (two cycles, the first above the second);
  // 5 -> 3 (another way in); 6 alone.
  AdjGraph g(7);
  g.edge(1, 2), g.edge(2, 1), g.edge(2, 3), g.edge(3, 4), g.edge(4, 3), g.edge(5, 3);
  std::vector<uint8_t> reached = {1, 0, 0, 0, 0, 0, 0};
  auto e =
      lr::entry_nodes(7, reached, [&](uint32_t v) { return std::span<const uint32_t>(g.succ[v]); });
  std::sort(e.begin(), e.end());
  // One of the first cycle, 5 and 6; never 3 or 4 (reached from above).
  REQUIRE(e.size() == 3);
  CHECK((e[0] == 1 || e[0] == 2));
  CHECK(e[1] == 5);
  CHECK(e[2] == 6);
}

TEST_CASE("floors: a class listed from a count up is unknown where it is absent", "[unit][diff]") {
  lr::Snapshot a, b;
  a.kind = b.kind = "core";
  a.floors["python container"] = b.floors["python container"] = 1000;
  a.classes = {{"python container", "cache", 2000, -1}, {"python", "Session", 2000, 128000}};
  b.classes = {{"python container", "cache", 5000, -1},
               {"python container", "log", 1200, -1},
               {"python", "Session", 5000, 320000}};
  const lr::SnapDiff d = lr::diff_snapshots(a, b);
  auto in = [](const std::vector<lr::ClassDelta>& v, const std::string& name) {
    return std::any_of(v.begin(), v.end(), [&](const auto& c) { return c.name == name; });
  };
  // Listed on both sides: a delta; absent from the older (under 1000
  // there): unknown, never "new" from 0.
  CHECK(in(d.classes, "cache"));
  CHECK(in(d.unknown, "log"));
  CHECK(!in(d.classes, "log"));
  CHECK(in(d.classes, "Session"));
  // Over a series: plotted only where every snapshot lists it.
  const lr::TrendReport t = lr::trend_of({a, b});
  CHECK(std::any_of(t.classes.begin(), t.classes.end(),
                    [](const auto& c) { return c.name == "cache" && c.counts[1] == 5000; }));
  CHECK(std::none_of(t.classes.begin(), t.classes.end(),
                     [](const auto& c) { return c.name == "log"; }));
  // Saved and read back; a floor that is no count is refused.
  a.source = "a";
  auto back = lr::snapshot_from_json(lr::snapshot_json(a), "a.json");
  REQUIRE(back.ok());
  CHECK(back->floors == a.floors);
  nlohmann::json bad = lr::snapshot_json(a);
  bad["floors"]["python container"] = -1;
  auto r = lr::snapshot_from_json(bad, "bad.json");
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("floor of 'python container' is not a count") != std::string::npos);
}
