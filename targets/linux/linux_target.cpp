// What the kernel target registers with the engine (kernel.hpp,
// linux_target): refcount encodings, and kernel dumps opened for the
// engine's snapshots and batch.
#include <fmt/format.h>

#include "targets/linux/kernel.hpp"

namespace lr {

namespace {

class OpenDump final : public OpenKernelDump {
 public:
  explicit OpenDump(std::unique_ptr<KernelTarget> k) : k_(std::move(k)) {}
  Program& prog() override { return k_->prog(); }
  std::string program() const override {
    std::string rel = k_->vmcoreinfo("OSRELEASE");
    return "linux " + (rel.empty() ? std::string("?") : rel);
  }
  std::string build_id() const override { return k_->vmcoreinfo("BUILD-ID"); }
  Result<Snapshot> snapshot(const std::string& source) override {
    return kernel_snapshot(*k_, source);
  }
  Result<std::vector<TargetFinding>> findings() override {
    LR_ASSIGN(auto checks, kernel_check(*k_));
    std::vector<TargetFinding> out;
    for (const auto& ch : checks)
      if (ch.violations)
        out.push_back(
            {"kernel", ch.name, std::nullopt,
             fmt::format("{} of {} violate: {}", ch.violations, ch.checked, ch.description)});
    return out;
  }
  std::vector<std::string> warnings() const override { return k_->warnings(); }

 private:
  std::unique_ptr<KernelTarget> k_;
};

class Dumps final : public KernelDumps {
 public:
  Result<std::unique_ptr<OpenKernelDump>> open(const std::string& path, const std::string& vmlinux,
                                               const DebugOptions& dbg) override {
    LR_ASSIGN(auto k, KernelTarget::open(path, vmlinux, dbg));
    return std::unique_ptr<OpenKernelDump>(std::make_unique<OpenDump>(std::move(k)));
  }
};

}  // namespace

TargetSpec linux_target() {
  TargetSpec t;
  t.name = "linux";
  // include/linux/file_ref.h (6.13) and rcuref.h (6.4): one reference is
  // stored as 0, and values from FILE_REF_RELEASED / RCUREF_RELEASED up mean
  // released (count 0).
  t.refcount_encodings.emplace_back("file_ref_t", RefEncoding{true, 0xc000000000000000});
  t.refcount_encodings.emplace_back("rcuref_t", RefEncoding{true, 0xc0000000});
  t.kernel = std::make_shared<Dumps>();
  return t;
}

}  // namespace lr
