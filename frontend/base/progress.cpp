#include "frontend/base/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace lrcli {

Progress::Progress(std::string what, const std::atomic<uint64_t>* count, bool streams,
                   std::string unit, uint64_t per_unit)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      count_(count),
      per_unit_(per_unit ? per_unit : 1) {
  const char* env = std::getenv("LEAKREF_PROGRESS");
  bool always = env && std::strcmp(env, "always") == 0;
  bool never = env && std::strcmp(env, "never") == 0;
  bool on = always || (!never && ::isatty(STDERR_FILENO) && !(streams && ::isatty(STDOUT_FILENO)));
  if (always) delay_ms_ = 0;
  if (on) thread_ = std::thread([this] { run(); });
}

Progress::~Progress() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Progress::run() {
  std::unique_lock<std::mutex> lk(mu_);
  // Forced on (no delay), the line is drawn at least once however short the work.
  if (delay_ms_ > 0 &&
      cv_.wait_for(lk, std::chrono::milliseconds(delay_ms_), [this] { return done_; }))
    return;
  while (true) {
    std::string line = fmt::format("\rleakref: {}: {} {}\x1b[K", what_,
                                   count_->load(std::memory_order_relaxed) / per_unit_, unit_);
    if (::write(STDERR_FILENO, line.data(), line.size()) < 0) break;
    shown_ = true;
    if (cv_.wait_for(lk, std::chrono::milliseconds(200), [this] { return done_; })) break;
  }
  if (shown_) {
    const char clear[] = "\r\x1b[K";
    if (::write(STDERR_FILENO, clear, sizeof clear - 1) < 0) return;
  }
}

}  // namespace lrcli
