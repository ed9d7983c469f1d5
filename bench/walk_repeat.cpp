// make bench helper: the fx_big list and hash table walked 10 times in one
// process, as a crash session or a library user repeats walks. Prints the
// first and the best walk (walking plus reading every refcount) of each.
// Usage: walk_repeat CORE BUCKETS
#include <cstdio>
#include <cstdlib>

#include "corelib/walks/walkspec.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CORE BUCKETS\n", argv[0]);
    return 2;
  }
  auto prog = lr::Program::open_core(argv[1], {});
  if (!prog.ok()) {
    std::fprintf(stderr, "%s\n", prog.error().message.c_str());
    return 1;
  }
  lr::WalkSpec list, hash;
  list.type = "struct bnode";
  list.head = "big_list";
  list.link = lr::WalkSpec::Link::kList;
  list.member = "link";
  hash.type = "struct hnode";
  hash.head = "*big_hash";
  hash.link = lr::WalkSpec::Link::kHlist;
  hash.member = "hnode";
  hash.buckets = std::strtoull(argv[2], nullptr, 0);
  for (auto* s : {&list, &hash}) {
    s->refcount = "refcount";
    s->keep_values = false;
    uint64_t first = 0, best = 0, n = 0;
    for (int i = 0; i < 10; ++i) {
      auto r = lr::run_walk(**prog, *s);
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", r.error().message.c_str());
        return 1;
      }
      n = r->visited;
      if (i == 0) first = r->walk_ns;
      if (i == 0 || r->walk_ns < best) best = r->walk_ns;
    }
    std::printf("%s %lu %lu %lu\n", s == &list ? "list" : "hash", static_cast<unsigned long>(n),
                static_cast<unsigned long>(first), static_cast<unsigned long>(best));
  }
  return 0;
}
