// A growable array of trivially copyable values in one malloc'd block, for
// arrays of tens of millions of entries built by appending (the heap walk's
// chunk index, the reference index). Growth is realloc: the C library moves a large
// block with mremap, so growing neither copies the entries nor holds the old
// and the new block at once, as std::vector's allocate-copy-free growth
// does (on an 8 GB core that was half of the walk's peak memory), nor
// touches every page a second time. Move-only.
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

  // Drops the entries from `n` on.
  void truncate(size_t n) {
    if (n < n_) n_ = n;
  }
  void clear() { n_ = 0; }
  T& front() { return p_[0]; }
  const T& front() const { return p_[0]; }
  T& back() { return p_[n_ - 1]; }
  const T& back() const { return p_[n_ - 1]; }

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
