// What targets register with the engine by name (allocators and their
// signatures, container kinds, text dumps and their readers): the first
// registration of a name is kept, a later one of the same name ignored.
// Targets register at start-up; lookups may come from several threads.
#pragma once

#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace lr {

template <class T>
class NamedRegistry {
 public:
  void add(const std::string& name, const T& item) {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [n, have] : items_)
      if (n == name) return;
    items_.emplace_back(name, item);
  }
  // The one registered as `name`; nullptr if none. The pointer stays valid
  // (items are never moved or removed).
  const T* find(const std::string& name) const {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [n, have] : items_)
      if (n == name) return &have;
    return nullptr;
  }
  // Every item, in the order registered (a copy: callers loop unlocked).
  std::vector<T> all() const {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<T> v;
    for (const auto& [n, have] : items_) v.push_back(have);
    return v;
  }
  // Every (name, item), in the order registered.
  std::vector<std::pair<std::string, T>> items() const {
    std::lock_guard<std::mutex> lk(mu_);
    return {items_.begin(), items_.end()};
  }
  std::vector<std::string> names() const {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<std::string> v;
    for (const auto& [n, have] : items_) v.push_back(n);
    return v;
  }

 private:
  mutable std::mutex mu_;
  std::deque<std::pair<std::string, T>> items_;
};

}  // namespace lr
