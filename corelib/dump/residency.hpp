// Which pages of a process were resident in RAM when it was captured: the
// process's /proc/PID/smaps and the /proc/PID/pagemap entries of its
// mappings, saved beside the core (leakref-snap does). A core holds every
// page's contents whether it was resident, swapped or never touched; these
// two files say which it was.
//
// The pagemap file is the 8-byte entries of each user-space mapping the
// smaps file lists (start below 2^47) that is partly resident (its Rss
// neither 0 nor its size: the others need no entry), in the smaps file's
// order, one per 4096-byte page; bit 63 of an entry is "present". A process
// with terabytes reserved (an ASan build, a JVM) thus needs entries only for
// what it touched.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "corelib/base/result.hpp"

namespace lr {

class Residency {
 public:
  // kBadFormat when the files do not fit each other (a pagemap of another
  // size than the smaps mappings need), naming the file.
  static Result<Residency> load(const std::string& smaps_path, const std::string& pagemap_path);

  // Resident bytes of [a, b). Calls in rising order of `a` are quickest (a
  // hint is kept: one Residency is for one thread at a time).
  uint64_t bytes(uint64_t a, uint64_t b) const;

  // Bytes of [a, b) inside the smaps file's mappings: a core's segments
  // that are not were captured from another process or at another time.
  uint64_t mapped(uint64_t a, uint64_t b) const;

  // The smaps file's own Rss sums: every mapping, and the writable ones.
  uint64_t smaps_rss() const { return rss_; }
  uint64_t smaps_writable_rss() const { return writable_rss_; }

 private:
  std::vector<std::pair<uint64_t, uint64_t>> runs_;  // resident [start, end), sorted, disjoint
  std::vector<std::pair<uint64_t, uint64_t>> maps_;  // the mappings, sorted, disjoint
  mutable size_t hint_ = 0;
  uint64_t rss_ = 0, writable_rss_ = 0;
  friend struct ResidencyBuilder;
};

}  // namespace lr
