// The nfs-ganesha hash table (src/include/hashtable.h) as a container:
// hash_table_t.partitions[parameter.index_size], each partition an rbt_head
// of ganesha's own red-black tree (rbt_node: left/next/parent, the entry in
// rbt_opaq -> struct hash_data {key, val}). The objects are the values (or
// the keys). What ganesha itself records is checked on the way: each
// partition's count and rbt_num_node against the nodes walked, and each
// value's recorded length against the object type's size. The last one is
// the self-check for types built from headers: a types file that does not
// describe this build stops the walk instead of yielding wrong fields.
#include <fmt/format.h>

#include <unordered_set>

#include "corelib/objects/containers.hpp"
#include "corelib/walks/container_kinds.hpp"
#include "targets/nfs-ganesha/nfs_ganesha.hpp"

namespace lr {

namespace {

constexpr uint64_t kMaxPartitions = 1u << 20;

struct HtLayout {
  uint64_t index_size_off = 0, index_size_bytes = 4, partitions_off = 0, part_size = 0;
  uint64_t count_off = 0, root_off = 0, nnodes_off = 0;
  TreeShape node;
  uint64_t opaq_off = 0;
  uint64_t side_addr_off = 0, side_len_off = 0;
};

Result<FieldLoc> need(const Type* t, const char* path) {
  auto r = resolve_path(t, path);
  if (!r.ok())
    return make_error(Errc::kNotFound,
                      fmt::format("{} has no member '{}': not an nfs-ganesha hash table layout",
                                  t->display(), path));
  return r;
}

const Type* pointee(const Type* t) {
  const Type* s = t ? t->strip() : nullptr;
  return s && s->kind == TypeKind::kPointer && s->target ? s->target->strip() : nullptr;
}

Result<HtLayout> ht_layout(Program& prog, const Type* ht, const std::string& side) {
  HtLayout l;
  LR_ASSIGN(FieldLoc idx, need(ht, "parameter.index_size"));
  LR_ASSIGN(FieldLoc parts, need(ht, "partitions"));
  l.index_size_off = idx.offset;
  l.index_size_bytes = idx.type ? idx.type->strip()->size : 0;
  l.partitions_off = parts.offset;
  const Type* pa = parts.type ? parts.type->strip() : nullptr;
  const Type* part =
      pa && pa->kind == TypeKind::kArray && pa->target ? pa->target->strip() : nullptr;
  if (!part || !part->is_aggregate() || !part->size || l.index_size_bytes > 8)
    return make_error(Errc::kInvalidArgument,
                      fmt::format("{}.partitions is not an array of partitions", ht->display()));
  l.part_size = part->size;
  LR_ASSIGN(FieldLoc cnt, need(part, "count"));
  LR_ASSIGN(FieldLoc root, need(part, "rbt.root"));
  LR_ASSIGN(FieldLoc nn, need(part, "rbt.rbt_num_node"));
  l.count_off = cnt.offset;
  l.root_off = root.offset;
  l.nnodes_off = nn.offset;
  const Type* node = pointee(root.type);
  if (!node) return make_error(Errc::kBadFormat, "rbt_head.root is not a pointer to a node");
  LR_ASSIGN(FieldLoc left, need(node, "left"));
  LR_ASSIGN(FieldLoc next, need(node, "next"));
  LR_ASSIGN(FieldLoc parent, need(node, "parent"));
  LR_ASSIGN(FieldLoc opaq, need(node, "rbt_opaq"));
  l.node.left_off = left.offset;
  l.node.right_off = next.offset;  // ganesha calls the right child "next"
  l.node.has_parent = true;
  l.node.parent_off = parent.offset;
  l.node.node_size = node->size;
  l.opaq_off = opaq.offset;
  LR_ASSIGN(const Type* hd, prog.types().find("struct hash_data"));
  LR_ASSIGN(FieldLoc sa, need(hd->strip(), (side + ".addr").c_str()));
  LR_ASSIGN(FieldLoc sl, need(hd->strip(), (side + ".len").c_str()));
  l.side_addr_off = sa.offset;
  l.side_len_off = sl.offset;
  if (l.part_size > 4096 || l.node.node_size > 4096)
    return make_error(Errc::kBadFormat, "the hash table types have an impossible layout");
  return l;
}

struct Walker {
  const Memory& mem;
  const HtLayout& l;
  const WalkLimits& lim;
  uint64_t obj_size;  // 0: no length check (keys)
  WalkResult r;
  std::unordered_set<uint64_t> nodes, objects;
  std::string mismatch;  // set: the very first value's size disagrees with the type

  void issue(uint64_t addr, std::string what) {
    ++r.issue_count;
    if (r.issues.size() < 100) r.issues.push_back({addr, std::move(what)});
  }
  bool stop(WalkStop s, uint64_t at, std::string why) {
    r.stop = s;
    r.stop_addr = at;
    r.stop_detail = std::move(why);
    return false;
  }
  // One node's entry: rbt_opaq -> hash_data -> {addr, len} of the chosen side.
  bool entry(uint64_t node, std::vector<uint64_t>* out) {
    auto hd = mem.read_u64(node + l.opaq_off);
    if (!hd.ok() || !hd.value())
      return stop(WalkStop::kFault, node,
                  fmt::format("rbt_node {:#x} has no readable rbt_opaq (hash_data)", node));
    auto a = mem.read_u64(hd.value() + l.side_addr_off);
    auto n = mem.read_u64(hd.value() + l.side_len_off);
    if (!a.ok() || !n.ok())
      return stop(WalkStop::kFault, node,
                  fmt::format("hash_data {:#x} is not readable: {}", hd.value(),
                              mem.why_unreadable(hd.value())));
    if (!a.value()) {
      issue(node, fmt::format("hash_data {:#x} holds a NULL pointer", hd.value()));
      return true;
    }
    if (obj_size && n.value() != obj_size) {
      // On the first entry this is the types, not the table: an error, so
      // that no command reads those values through the wrong layout.
      if (objects.empty()) {
        mismatch = fmt::format(
            "ganesha recorded {} bytes for the value at {:#x}, but {} bytes "
            "were expected: the types do not describe this build, or the "
            "walk's type names another value type",
            n.value(), a.value(), obj_size);
        return false;
      }
      return stop(WalkStop::kCorrupt, a.value(),
                  fmt::format("ganesha recorded {} bytes for the value at {:#x}, but the type is "
                              "{} bytes: the types do not describe this build, or the walk's type "
                              "names another value type",
                              n.value(), a.value(), obj_size));
    }
    if (objects.insert(a.value()).second)
      out->push_back(a.value());
    else
      issue(node, fmt::format("value {:#x} is in the table twice", a.value()));
    return true;
  }
  // Partition i, whose bytes `p` were read from `pa`.
  bool partition(uint64_t i, uint64_t pa, const uint8_t* p) {
    uint64_t count = load_uint(p + l.count_off, 8);
    uint64_t root = load_uint(p + l.root_off, 8);
    uint64_t nn = load_uint(p + l.nnodes_off, 4);
    WalkLimits tl;
    tl.max_nodes = lim.max_nodes - r.objects.size();
    tl.interrupted = lim.interrupted;
    WalkResult t = walk_tree(mem, root, l.node, 0, tl);
    for (auto& is : t.issues) issue(is.addr, std::move(is.what));
    if (!t.ok()) {
      r.stop = t.stop;
      r.stop_addr = t.stop_addr;
      r.stop_detail = fmt::format("partition {}: {}", i, t.stop_detail);
      r.cycle_start = t.cycle_start;
    }
    std::vector<uint64_t> objs;
    for (uint64_t n : t.objects) {
      if (!nodes.insert(n).second)
        return stop(WalkStop::kCorrupt, n, fmt::format("rbt_node {:#x} is in two partitions", n));
      if (!entry(n, &objs)) break;
    }
    if (!mismatch.empty()) return false;
    r.objects.insert(r.objects.end(), objs.begin(), objs.end());
    lim.sink(objs.data(), objs.size());
    if (t.objects.empty()) ++r.empty_buckets;
    r.longest_chain = std::max<uint64_t>(r.longest_chain, t.objects.size());
    if (!r.ok()) return false;
    if (count != t.objects.size())
      issue(pa, fmt::format("partition {} records count {}, but {} entries were walked", i, count,
                            t.objects.size()));
    if (nn != t.objects.size())
      issue(pa, fmt::format("partition {} records rbt_num_node {}, but {} nodes were walked", i, nn,
                            t.objects.size()));
    return true;
  }
};

Result<WalkResult> walk_hashtable_head(Program& prog, const Variable& head, const std::string& side,
                                       uint64_t obj_size, const WalkLimits& lim) {
  // `side` is "val" or "key": the engine checks it against the kind's members.
  const Memory& mem = prog.mem();
  const Type* t = head.type ? head.type->strip() : nullptr;
  uint64_t at = head.addr;
  if (t && t->kind == TypeKind::kPointer) {
    LR_ASSIGN(at, mem.read_u64(head.addr));
    t = pointee(t);
    if (!at) return make_error(Errc::kNotFound, fmt::format("{} is NULL", head.name));
  }
  if (!t || !t->is_aggregate() || t->name != "hash_table")
    return make_error(
        Errc::kInvalidArgument,
        fmt::format("a hash-table walk needs a head of type hash_table_t or a pointer to one; "
                    "{} is {}",
                    head.name, head.type ? head.type->display() : "an untyped address"));
  LR_ASSIGN(HtLayout l, ht_layout(prog, t, side));
  uint64_t nparts = 0;
  LR_TRY(mem.read(at + l.index_size_off, &nparts, l.index_size_bytes));
  if (!nparts || nparts > kMaxPartitions)
    return make_error(
        Errc::kBadFormat,
        fmt::format("{}: parameter.index_size is {}: not a partition count", head.name, nparts));
  Walker w{mem, l, lim, side == "val" ? obj_size : 0, {}, {}, {}, {}};
  w.r.buckets = nparts;
  std::vector<uint8_t> buf(l.part_size);
  for (uint64_t i = 0; i < nparts; ++i) {
    uint64_t pa = at + l.partitions_off + i * l.part_size;
    if (!mem.read(pa, buf.data(), buf.size()).ok()) {
      ++w.r.faulted_buckets;
      w.stop(
          WalkStop::kFault, pa,
          fmt::format("partition {} at {:#x} is not readable: {}", i, pa, mem.why_unreadable(pa)));
      break;
    }
    if (!w.partition(i, pa, buf.data())) break;
  }
  if (!w.mismatch.empty()) return make_error(Errc::kBadFormat, head.name + ": " + w.mismatch);
  return std::move(w.r);
}

}  // namespace

TargetSpec nfs_ganesha_target() {
  ContainerKind k;
  k.name = "hashtable";
  k.mode = "hash:ganesha";
  k.what = "an nfs-ganesha hash_table_t";
  k.members = {"val", "key"};
  k.walk = &walk_hashtable_head;
  TargetSpec t;
  t.name = "nfs-ganesha";
  t.containers.push_back(k);
  return t;
}

}  // namespace lr
