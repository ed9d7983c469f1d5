// libFuzzer target: the expression language compiled against a small struct
// (ints, a bitfield, an enum, a char array, a refcount wrapper, a pointer to
// itself, a list head whose entries are declared) and evaluated over a
// buffer memory that holds one object and its list.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "corelib/objects/expr.hpp"

namespace {

struct BufMemory final : lr::Memory {
  static constexpr uint64_t kBase = 0x10000;
  std::vector<uint8_t> bytes = std::vector<uint8_t>(4096);
  const uint8_t* span(uint64_t a, size_t n) const override {
    return a >= kBase && a - kBase <= bytes.size() && n <= bytes.size() - (a - kBase)
               ? bytes.data() + (a - kBase)
               : nullptr;
  }
  lr::Result<void> read(uint64_t a, void* out, size_t n) const override {
    const uint8_t* p = span(a, n);
    if (!p) return lr::make_error(lr::Errc::kFault, "unmapped");
    std::memcpy(out, p, n);
    return {};
  }
};

struct Types {
  lr::Type i32, u8, chr, arr, e, atomic, self, selfp, lh, lhp, obj;
  Types() {
    i32 = {lr::TypeKind::kInt, "int", 4, true};
    u8 = {lr::TypeKind::kInt, "unsigned char", 1, false};
    chr = {lr::TypeKind::kInt, "char", 1, true, true};
    arr.kind = lr::TypeKind::kArray;
    arr.target = &chr;
    arr.count = 8;
    arr.size = 8;
    e = {lr::TypeKind::kEnum, "state", 4, false};
    e.enumerators = {{"ST_NEW", 0}, {"ST_DEAD", 7}};
    atomic = {lr::TypeKind::kStruct, "atomic_t", 4};
    atomic.members = {{"counter", 0, 0, 0, &i32}};
    lh = {lr::TypeKind::kStruct, "list_head", 16};
    lhp = {lr::TypeKind::kPointer, "", 8};
    lhp.target = &lh;
    lh.members = {{"next", 0, 0, 0, &lhp}, {"prev", 8, 0, 0, &lhp}};
    obj = {lr::TypeKind::kStruct, "obj", 64};
    selfp = {lr::TypeKind::kPointer, "", 8};
    selfp.target = &obj;
    obj.members = {{"ref", 0, 0, 0, &atomic}, {"flags", 4, 0, 3, &u8},    {"state", 8, 0, 0, &e},
                   {"name", 12, 0, 0, &arr},  {"next", 24, 0, 0, &selfp}, {"kids", 32, 0, 0, &lh},
                   {"link", 48, 0, 0, &lh}};
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Types t;
  static BufMemory mem = [] {
    BufMemory m;
    // obj at base: ref 3, state ST_DEAD, name "ab", next -> itself,
    // kids: a ring of two entries (objects at +0x100, +0x200, linked by `link`).
    uint64_t o = BufMemory::kBase;
    auto put = [&](uint64_t a, uint64_t v, size_t n) { std::memcpy(&m.bytes[a - o], &v, n); };
    put(o, 3, 4);
    put(o + 8, 7, 4);
    put(o + 12, 0x6261, 2);
    put(o + 24, o, 8);
    put(o + 32, o + 0x100 + 48, 8);
    put(o + 40, o + 0x200 + 48, 8);
    put(o + 0x100 + 48, o + 0x200 + 48, 8);
    put(o + 0x100 + 56, o + 32, 8);
    put(o + 0x200 + 48, o + 32, 8);
    put(o + 0x200 + 56, o + 0x100 + 48, 8);
    return m;
  }();
  std::string_view s(reinterpret_cast<const char*>(data), size);
  (void)lr::Expr::check_syntax(s);
  lr::ExprScope sc;
  sc.type = &t.obj;
  sc.vars = {"a", "held"};
  sc.element = [](const lr::Type*, std::string_view path) -> lr::Result<lr::ListElement> {
    if (path == "kids") return lr::ListElement{&t.obj, 48};
    return lr::make_error(lr::Errc::kNotFound, "no element type");
  };
  auto e = lr::Expr::compile(s, sc);
  if (e.ok()) {
    int64_t vars[2] = {1, 2};
    (void)e.value()->eval(mem, mem.bytes.data(), BufMemory::kBase, vars);
  }
  return 0;
}
