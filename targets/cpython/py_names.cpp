// Python names of references (py_names.hpp).
#include "targets/cpython/py_names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>

#include "corelib/debuginfo/program.hpp"

namespace lr {

namespace {

constexpr uint32_t kNone = UINT32_MAX;
// dk_kind (Include/internal/pycore_dict.h of 3.11): 0 general entries (with
// the hash), 1 str keys, 2 split (str keys, values apart).
constexpr uint8_t kDictGeneral = 0;
// How far a path is searched: blocks visited, and words from the object.
constexpr size_t kMaxVisited = 1 << 18;
// Blocks visited by all of one namer's searches: past them, what is left
// is named from its own block (a bound on one command's time).
constexpr size_t kMaxSpent = 1 << 22;
constexpr int kMaxDepth = 40;
// Holders named from their anchor; past them, from their own block (an
// interned str may have a hundred thousand).
constexpr size_t kMaxSearched = 256;

}  // namespace

PyNamer::PyNamer(const IndexedCore& core, const PyCensus& census,
                 const std::vector<PyThreadStack>& stacks)
    : core_(core),
      ix_(*core.ci.index),
      c_(census),
      L_(census.layout),
      v_(core.prog->mem(), census.layout),
      stacks_(stacks),
      obj_of_(ix_.chunks(), kNone),
      roots_(std::make_unique<RefNamer>(core, none_)) {
  for (size_t i = 0; i < c_.objects.size(); ++i)
    if (c_.objects[i].chunk < obj_of_.size()) obj_of_[c_.objects[i].chunk] = uint32_t(i);
  for (const PyThreadStack& t : stacks_)
    for (const PyFrame& f : t.frames)
      frames_.push_back({f.addr, f.slots + (uint64_t(f.nlocalsplus) + f.nstack) * 8, &f});
  std::sort(frames_.begin(), frames_.end(),
            [](const FrameRange& a, const FrameRange& b) { return a.begin < b.begin; });
  index_owners();
}

PyNamer::~PyNamer() = default;

const PyObj* PyNamer::object(uint32_t chunk) const {
  const uint32_t i = chunk < obj_of_.size() ? obj_of_[chunk] : kNone;
  return i == kNone || !c_.objects[i].live() ? nullptr : &c_.objects[i];
}

// The blocks each object keeps apart from itself (a dict's keys table and
// values, a list's items, an instance's values), each module's dict, and
// each instance's own __dict__.
void PyNamer::index_owners() {
  const std::vector<uint8_t> module = c_.modules();
  const Memory& mem = v_.mem();
  // The blocks objects keep apart (python_owned_blocks: a block that is an
  // object is named as one), and where their words stop being live.
  for (const PyOwnedBlock& b : python_owned_blocks(ix_.heap(), mem, c_)) {
    const size_t ch = ix_.chunk_at(b.user);
    if (ch == SIZE_MAX) continue;
    aux_[uint32_t(ch)] = {b.kind, b.owner};
    if (b.live_end != UINT64_MAX) spare_[uint32_t(ch)] = b.live_end;
  }
  for (uint32_t i = 0; i < c_.objects.size(); ++i) {
    const PyObj& o = c_.objects[i];
    if (!o.live()) continue;
    if (module[o.type]) {
      auto d = mem.read_u64(o.addr + L_.md_dict);
      auto n = mem.read_u64(o.addr + L_.md_name);
      auto name = n.ok() ? v_.str(n.value(), 200) : std::nullopt;
      const size_t ch = d.ok() ? ix_.chunk_at(d.value()) : SIZE_MAX;
      if (ch != SIZE_MAX) modules_[uint32_t(ch)] = name ? *name : "?";
    }
    // A managed dict: a __dict__ made of the values at word -3 of the
    // object (its values: python_owned_blocks, or 3.13's inline, step()).
    if (c_.type(o).flags & kTpManagedDict)
      if (auto d = mem.read_u64(o.addr - 24); d.ok() && d.value()) instance_of_[d.value()] = i;
  }
}

// A word holding a GC link: it points at a tracked object's PyGC_Head (its
// low two bits are flags), not at the object.
bool PyNamer::gc_link(const Ref& r) const {
  const PyObj* o = object(r.target);
  return o && (c_.type(*o).flags & kTpHaveGc) && (r.value & ~uint64_t{3}) == o->addr - L_.gc_head;
}

// Whether `r` is a live word that holds what block `dst` is: the object
// itself (not its inside), or anywhere in a block an object keeps apart.
bool PyNamer::usable(Ref r, uint32_t dst) const {
  r.value = ref_value(*core_.prog, r);  // the index keeps a block's words unread
  if (r.stale || gc_link(r)) return false;
  if (r.kind == RefFrom::kChunk) {
    const size_t src = ix_.chunk_at(r.from);
    if (src != SIZE_MAX && src < obj_of_.size() && obj_of_[src] != kNone) {
      const PyObj& s = c_.objects[obj_of_[src]];
      if (!s.live()) return false;  // a free-listed object's words are from its last life
      if (holds_no_references(c_.type(s)) && r.from >= s.addr + 16) return false;
    }
    // A list's spare slots, a dict's keys table past its entries.
    if (auto sp = spare_.find(uint32_t(src)); sp != spare_.end() && r.from >= sp->second)
      return false;
  }
  if (const PyObj* o = object(dst)) return r.value == o->addr;
  return aux_.count(dst) != 0;
}

std::string PyNamer::key_text(uint64_t key, Mode& mode) const {
  const std::string k = v_.repr(key);
  const Mode m = mode;
  mode = Mode::kPlain;
  const bool ident =
      k.size() > 2 && k.front() == '\'' && PyValues::identifier(k.substr(1, k.size() - 2));
  if (m == Mode::kGlobal && ident) return k.substr(1, k.size() - 2);
  if (m == Mode::kAttr && ident) return "." + k.substr(1, k.size() - 2);
  return "[" + k + "]";
}

// The entry of a dict's keys table (values: the dict's split values) that
// word `from` lies in: "[key]" for its value, ", key K" for the key itself.
void PyNamer::dict_key(uint32_t dict, uint64_t from, bool values, Mode& mode,
                       std::string& out) const {
  const Memory& mem = v_.mem();
  const uint64_t d = c_.objects[dict].addr;
  auto keys = mem.read_u64(d + L_.dict_keys);
  auto kind =
      keys.ok() ? mem.read_as<uint8_t>(keys.value() + L_.dk_kind) : Result<uint8_t>(keys.error());
  auto lg = keys.ok() ? mem.read_as<uint8_t>(keys.value() + L_.dk_log2_index_bytes)
                      : Result<uint8_t>(keys.error());
  if (!kind.ok() || !lg.ok() || lg.value() > 40) {
    out += fmt::format("[? at {:#x}]", from);
    return;
  }
  const uint64_t entries = keys.value() + L_.dk_indices + (uint64_t{1} << lg.value());
  const bool general = kind.value() == kDictGeneral;
  const uint64_t size = general ? L_.entry_size : L_.uentry_size;
  const uint64_t key_off = general ? L_.entry_key : L_.uentry_key;
  uint64_t index = 0;
  bool is_key = false;
  if (values) {
    auto vp = mem.read_u64(d + L_.dict_values);
    if (!vp.ok() || from < vp.value()) return void(out += "[?]");
    index = (from - vp.value()) / 8;
  } else {
    if (from < entries) return void(out += "[?]");
    index = (from - entries) / size;
    is_key = (from - entries) % size == key_off;
  }
  auto key = mem.read_u64(entries + index * size + key_off);
  if (!key.ok()) return void(out += "[?]");
  if (is_key) {
    mode = Mode::kPlain;
    out += ", key " + v_.repr(key.value());
    return;
  }
  out += key_text(key.value(), mode);
}

// The attribute of instance `owner` whose value is the word `from` of its
// values at `vals`, named by the class's shared keys
// (PyHeapTypeObject.ht_cached_keys).
void PyNamer::attribute(const PyObj& owner, uint64_t vals, uint64_t from, Mode& mode,
                        std::string& out) const {
  const Memory& mem = v_.mem();
  auto keys = mem.read_u64(c_.type(owner).addr + L_.ht_cached_keys);
  auto lg = keys.ok() ? mem.read_as<uint8_t>(keys.value() + L_.dk_log2_index_bytes)
                      : Result<uint8_t>(keys.error());
  auto n = keys.ok() ? mem.read_as<int64_t>(keys.value() + L_.dk_nentries)
                     : Result<int64_t>(keys.error());
  mode = Mode::kPlain;
  const uint64_t index = (from - vals) / 8;
  if (!vals || !lg.ok() || !n.ok() || lg.value() > 40 || from < vals ||
      index >= uint64_t(std::max<int64_t>(n.value(), 0)))
    return void(out += ".?");
  const uint64_t e =
      keys.value() + L_.dk_indices + (uint64_t{1} << lg.value()) + index * L_.uentry_size;
  auto key = mem.read_u64(e + L_.uentry_key);
  Mode attr = Mode::kAttr;
  out += key.ok() ? key_text(key.value(), attr) : ".?";
}

// How a Python user reaches word `off` of a cell or a function: a closure
// variable is handler.__closure__[0].cell_contents. Null for any other.
const char* PyNamer::closure_attr(const PyType& T, uint64_t off) const {
  if (T.name == "cell" && off == L_.cell_ref) return ".cell_contents";
  if (T.name != "function") return nullptr;
  if (off == L_.func_closure) return ".__closure__";
  if (off == L_.func_defaults) return ".__defaults__";
  if (off == L_.func_kwdefaults) return ".__kwdefaults__";
  return nullptr;
}

void PyNamer::step(uint32_t src, uint64_t from, Mode& mode, std::string& out) const {
  const Memory& mem = v_.mem();
  if (auto a = aux_.find(src); a != aux_.end()) {
    const PyObj& owner = c_.objects[a->second.owner];
    switch (a->second.kind) {
      case PyOwnedBlock::kDictKeys:
        return dict_key(a->second.owner, from, false, mode, out);
      case PyOwnedBlock::kDictValues:
        return dict_key(a->second.owner, from, true, mode, out);
      case PyOwnedBlock::kListItems: {
        auto items = mem.read_u64(owner.addr + L_.list_item);
        mode = Mode::kPlain;
        out += items.ok() && from >= items.value() ? fmt::format("[{}]", (from - items.value()) / 8)
                                                   : "[?]";
        return;
      }
      case PyOwnedBlock::kInstanceValues: {
        auto vals = mem.read_u64(owner.addr - 32);
        return attribute(owner, vals.ok() ? vals.value() : 0, from, mode, out);
      }
    }
  }
  const PyObj* s = object(src);
  if (!s) {
    out += fmt::format(" → block {:#x}+{:#x}", ix_.heap().in_use[src].user,
                       from - ix_.heap().in_use[src].user);
    return;
  }
  const PyType& T = c_.type(*s);
  const uint64_t off = from - s->addr;
  // A dict's and a list's own words lead to what they keep apart; the
  // names come from there.
  if ((T.flags & kTpDictSubclass) && (off == L_.dict_keys || off == L_.dict_values)) {
    if (instance_of_.count(s->addr) && mode == Mode::kPlain) mode = Mode::kAttr;
    return;
  }
  if ((T.flags & kTpListSubclass) && off == L_.list_item) return;
  if ((T.flags & kTpTypeSubclass) && off == L_.tp_dict) {
    mode = Mode::kAttr;  // a class's attributes
    return;
  }
  if ((T.flags & kTpManagedDict) &&
      (from == s->addr - 24 || (!L_.inline_values && from == s->addr - 32))) {
    mode = Mode::kAttr;
    return;
  }
  if (L_.inline_values && (T.flags & kTpInlineValues) &&
      from >= s->addr + T.basicsize + L_.values_items)
    return attribute(*s, s->addr + T.basicsize + L_.values_items, from, mode, out);
  if ((T.flags & kTpTupleSubclass) && from >= s->addr + L_.tuple_item) {
    mode = Mode::kPlain;
    out += fmt::format("[{}]", (from - s->addr - L_.tuple_item) / 8);
    return;
  }
  mode = Mode::kPlain;
  if (const char* attr = closure_attr(T, off)) return void(out += attr);
  out += fmt::format(" → {} at {:#x}, word +{:#x}", T.name, s->addr, from - s->addr);
}

// The frame whose words hold `from` (its header, locals and value stack:
// co_nlocalsplus + co_stacksize slots), found among the frames by address.
std::string PyNamer::frame_slot(uint64_t from) const {
  auto it = std::upper_bound(frames_.begin(), frames_.end(), from,
                             [](uint64_t a, const FrameRange& r) { return a < r.begin; });
  if (it == frames_.begin() || from >= (--it)->end) return "";
  const PyFrame& f = *it->frame;
  const std::string at =
      fmt::format("frame {}() line {}", f.function, f.line < 0 ? "?" : std::to_string(f.line));
  if (from < f.slots) return at + ", its frame";
  const uint64_t local = (from - f.slots) / 8;
  if (local >= f.nlocalsplus) return at + ", value stack";
  const std::string n = python_local_name(v_, f.code, local);
  return at + ", local " + (n.empty() ? "?" : n);
}

std::string PyNamer::root_text(const Ref& r) const {
  if (r.kind == RefFrom::kChunk) return "";
  if (std::string f = frame_slot(r.from); !f.empty()) return f;
  return roots_->holder(r, nullptr);
}

PyNamer::Named PyNamer::compose(std::string anchor, Mode mode, uint32_t b,
                                const std::unordered_map<uint32_t, Parent>& parent,
                                uint32_t target) const {
  Named out{std::move(anchor), mode};
  for (int n = 0; b != target && n <= kMaxDepth; ++n) {
    auto it = parent.find(b);
    if (it == parent.end()) break;
    step(b, it->second.from, out.mode, out.text);
    b = it->second.to;
  }
  return out;
}

// Up from block `c`, breadth first: the first module dict, frame slot or
// (failing both) C root found names the path down to `c`.
PyNamer::Named PyNamer::search(uint32_t c) const {
  std::unordered_map<uint32_t, Parent> parent;  // a block: the word of it leading down
  std::deque<std::pair<uint32_t, int>> queue{{c, 0}};
  parent[c] = {kNone, 0};
  std::string c_root;
  uint32_t c_root_block = kNone;
  while (!queue.empty() && parent.size() < kMaxVisited && spent_ < kMaxSpent) {
    const auto [b, depth] = queue.front();
    queue.pop_front();
    ++spent_;
    if (auto m = modules_.find(b); m != modules_.end())
      return compose("module " + m->second + ", global ", Mode::kGlobal, b, parent, c);
    for (const Ref& r : ix_.refs_to(b)) {
      if (!usable(r, b)) continue;
      if (r.kind != RefFrom::kChunk) {
        if (std::string f = frame_slot(r.from); !f.empty()) {
          return compose(f, Mode::kPlain, b, parent, c);
        }
        if (c_root_block == kNone) c_root = root_text(r), c_root_block = b;
        continue;
      }
      const size_t src = ix_.chunk_at(r.from);
      if (src == SIZE_MAX || depth >= kMaxDepth || parent.count(uint32_t(src))) continue;
      parent[uint32_t(src)] = {b, r.from};
      queue.emplace_back(uint32_t(src), depth + 1);
    }
  }
  if (c_root_block == kNone) return {};
  return compose(c_root, Mode::kPlain, c_root_block, parent, c);
}

// A block no anchor names (nothing live reaches it, or the search stopped):
// the object it is or belongs to, by address.
std::string PyNamer::unnamed(uint32_t b) const {
  const PyObj* o = object(b);
  if (auto a = aux_.find(b); a != aux_.end()) o = &c_.objects[a->second.owner];
  if (o) return fmt::format("({} at {:#x})", c_.type(*o).name, o->addr);
  return fmt::format("(block {:#x})", ix_.heap().in_use[b].user);
}

std::vector<PyHolder> PyNamer::holders(const PyObj& o) const {
  std::vector<PyHolder> out;
  for (const Ref& r : ix_.refs_to(o.chunk)) {
    if (!usable(r, o.chunk)) continue;
    PyHolder h{r.from, "", r.kind != RefFrom::kChunk};
    if (h.root) {
      h.name = root_text(r);
    } else {
      // The path to the block holding the word, and the word.
      const size_t src = ix_.chunk_at(r.from);
      Named up = out.size() < kMaxSearched ? search(uint32_t(src)) : Named{};
      if (up.text.empty()) up.text = unnamed(uint32_t(src));
      step(uint32_t(src), r.from, up.mode, up.text);
      h.name = std::move(up.text);
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::string PyNamer::path(const PyObj& o) const {
  return search(o.chunk).text;
}

}  // namespace lr
