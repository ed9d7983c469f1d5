// A growable array of trivially copyable values in one malloc'd block, for
// arrays of tens of millions of entries built by appending. Growth is
// realloc: glibc moves a large block with mremap, so growing neither copies
// the entries nor touches every page a second time, as std::vector's
// allocate-copy-free growth does (a third of a pointer-dense index build
// went to that copying and its page faults). Internal to corelib.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

namespace lr {

template <class T>
class PodArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  PodArray() = default;
  PodArray(const PodArray&) = delete;
  PodArray& operator=(const PodArray&) = delete;
  PodArray(PodArray&& o) noexcept { swap(o); }
  PodArray& operator=(PodArray&& o) noexcept {
    swap(o);
    return *this;
  }
  ~PodArray() { std::free(p_); }

  void push_back(const T& v) {
    if (n_ == cap_) reallocate(cap_ ? cap_ * 2 : 4096);
    p_[n_++] = v;
  }
  void reserve(size_t n) {
    if (n > cap_) reallocate(n);
  }
  // Grows to `n` entries, new ones uninitialised (the caller writes them).
  void resize_uninitialized(size_t n) {
    reserve(n);
    n_ = n;
  }
  // Gives back the unused tail (in place for a large block).
  void shrink_to_fit() {
    if (n_ < cap_) reallocate(n_ ? n_ : 1);
  }

  size_t size() const { return n_; }
  size_t capacity() const { return cap_; }
  bool empty() const { return n_ == 0; }
  T* data() { return p_; }
  const T* data() const { return p_; }
  T* begin() { return p_; }
  T* end() { return p_ + n_; }
  const T* begin() const { return p_; }
  const T* end() const { return p_ + n_; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }

 private:
  void reallocate(size_t cap) {
    void* q = std::realloc(p_, cap * sizeof(T));
    if (!q) throw std::bad_alloc();
    p_ = static_cast<T*>(q);
    cap_ = cap;
  }
  void swap(PodArray& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(cap_, o.cap_);
  }
  T* p_ = nullptr;
  size_t n_ = 0, cap_ = 0;
};

}  // namespace lr
