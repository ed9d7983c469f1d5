// How long work shows itself, and what the user should hear of it: the engine counts what it has
// done in an atomic counter, and a front end that wants a progress line gives an implementation of
// this (the CLI draws one on a terminal; a batch worker or a test gives none). The engine never
// draws anything itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace lr {

class ProgressDisplay {
 public:
  virtual ~ProgressDisplay() = default;
  // Shows `count` / `per_unit` UNIT as WHAT until the returned token is
  // destroyed. `count` must outlive the token.
  virtual std::shared_ptr<void> show(const std::string& what, const std::atomic<uint64_t>* count,
                                     const std::string& unit, uint64_t per_unit) = 0;
  // A line the user should see now, not in the answer (types were just built
  // with a compiler, and where they went).
  virtual void note(const std::string& line) = 0;
};

// A display's token for `what`, or none when there is no display.
inline std::shared_ptr<void> show_progress(ProgressDisplay* d, const std::string& what,
                                           const std::atomic<uint64_t>* count,
                                           const std::string& unit, uint64_t per_unit = 1) {
  return d ? d->show(what, count, unit, per_unit) : nullptr;
}

}  // namespace lr
