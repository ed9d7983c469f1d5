// A progress line on stderr for long work, only on a terminal: it appears
// after half a second, is redrawn a few times a second, and is erased when
// the work ends, so output in pipes and files never contains it.
// LEAKREF_PROGRESS=always|never overrides the terminal test.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace lrcli {

class Progress {
 public:
  // Shows "leakref: WHAT: N UNIT" from `count` / `per_unit` (`count`
  // borrowed; must outlive this). Does nothing when stderr is not a
  // terminal, or when the work streams its output (`streams`) to the same
  // terminal, where the line would break into it.
  Progress(std::string what, const std::atomic<uint64_t>* count, bool streams,
           std::string unit = "objects", uint64_t per_unit = 1);
  ~Progress();  // stops and erases the line
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

 private:
  void run();
  std::string what_, unit_;
  const std::atomic<uint64_t>* count_;
  uint64_t per_unit_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false, shown_ = false;
  int delay_ms_ = 500;
  std::thread thread_;
};

}  // namespace lrcli
