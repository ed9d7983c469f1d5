// What the account groups heap blocks by (its breakdown under live, leaked
// and pooled): a block's type (the leak analysis's, else the profile object
// in it, else its vtable's class, else what the program's target says it
// made the block as; objects a program's cache keeps say so, with the
// cache), the profile set of the object in it, or the module that owns it
// (its vtable's library, else the program's part that owns it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "corelib/answers/block_names.hpp"
#include "corelib/answers/core_index.hpp"

namespace lr {

enum class BlockKeyBy { kType, kSet, kModule };

// A block's key, by its index in the heap; the view lasts until the next
// call. Nothing is stored per block; vtable names are kept per vtable
// pointer (only words into a module are looked up: a first word that is data
// is no vtable).
class BlockKeys {
 public:
  // Borrows all three.
  BlockKeys(const IndexedCore& core, RefNamer& names, const KnownObjects& known, BlockKeyBy by);
  std::string_view operator()(size_t i);

 private:
  std::string_view type_key(size_t i, const HeapChunk& c);
  void held_by_caches();
  void vtable_span();
  std::string_view vtable_key(const HeapChunk& c);
  bool first_word(uint64_t a, uint64_t* v);

  const IndexedCore* core_;
  RefNamer* names_;
  const KnownObjects* known_;
  BlockKeyBy by_;  // compared per block: no string compares
  static constexpr size_t kAhead = 16;
  uint64_t lo_ = UINT64_MAX, hi_ = 0;  // the vtables' span
  // Copies of a BlockKeys share these (it is kept in a std::function).
  struct State {
    std::string named;  // the last name made
    Memory::Window w, ahead;
    std::unordered_map<uint64_t, std::string> vtables;
    std::unordered_map<uint64_t, uint32_t> kept;  // block -> key
    std::vector<std::string> kept_keys;
    std::unordered_map<const Type*, std::string> types;
  };
  std::shared_ptr<State> st_ = std::make_shared<State>();
};

}  // namespace lr
