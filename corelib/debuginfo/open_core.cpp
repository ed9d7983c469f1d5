#include "corelib/debuginfo/open_core.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "corelib/debuginfo/types_build.hpp"
#include "corelib/dump/elfcore.hpp"

namespace lr {

Result<std::unique_ptr<Program>> open_process_core(const std::string& path,
                                                   const CoreOpenOptions& o) {
  // A kernel dump opened as a process core read as a process with pid 1
  // (ELF vmcores) or "bad magic" (kdump): say what it is.
  auto kernel_dump = [&](const char* what) {
    return make_error(Errc::kUnsupported,
                      fmt::format("{} is a kernel dump ({}), not a process core{}{}", path, what,
                                  o.kernel_dump_hint.empty() ? "" : ": ", o.kernel_dump_hint));
  };
  auto opened = Program::open_core(path, o.program);
  if (!opened.ok() && is_kdump_file(path)) return kernel_dump("kdump-compressed");
  LR_ASSIGN(auto prog, std::move(opened));
  if (prog->core() && prog->core()->is_kernel()) return kernel_dump("ELF with a VMCOREINFO note");
  for (const auto& t : o.types) LR_TRY(add_types_file(*prog, t, o.types_origin));
  if (o.types.empty())
    if (std::string cached = cached_types_for(*prog); !cached.empty())
      LR_TRY(add_types_file(*prog, cached));
  return prog;
}

namespace {
TypesOrigin& origin_setting() {
  static TypesOrigin o;
  return o;
}
}  // namespace

void set_types_origin(const TypesOrigin& o) {
  origin_setting() = o;
}
const TypesOrigin& types_origin() {
  return origin_setting();
}

std::string cached_types_for(const Program& prog) {
  const Module* exe = prog.modules().exe();
  if (!exe || exe->has_dwarf() || exe->build_id.empty()) return "";
  std::string plain = types_cache_path("types", exe->build_id);
  if (plain.empty()) return "";
  struct stat st;
  if (::stat(plain.c_str(), &st) == 0) return plain;
  // types-BUILDID-RECIPE.so: a profile's recipe made it for this build. The
  // newest, as a later recipe supersedes an older one (each is stamped with
  // the build-id, which add_types_file checks again).
  namespace fs = std::filesystem;
  const fs::path p(plain);
  const std::string prefix = p.stem().string() + "-";
  std::error_code ec;
  std::string best;
  fs::file_time_type newest{};
  for (const auto& f : fs::directory_iterator(p.parent_path(), ec)) {
    const std::string n = f.path().filename().string();
    if (n.rfind(prefix, 0) != 0 || f.path().extension() != ".so") continue;
    auto t = f.last_write_time(ec);
    if (ec) continue;
    if (best.empty() || t > newest) newest = t, best = f.path().string();
  }
  return best;
}

Result<void> add_types_file(Program& prog, const std::string& path, const TypesOrigin& origin) {
  const std::string& pre = origin.prefix;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return make_error(Errc::kIo, fmt::format("{}{}: {}", pre, path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return make_error(Errc::kIo, fmt::format("{}{}: not a regular file", pre, path));
  // A types file made for one build must not describe another.
  std::string target = types_file_target(path);
  const Module* exe = prog.modules().exe();
  if (!target.empty() && exe && !exe->build_id.empty() && target != exe->build_id)
    return make_error(Errc::kBadFormat, fmt::format("{}: built for build-id {}, but {} has {}",
                                                    path, target, exe->path, exe->build_id));
  Module* m = prog.modules().add_types(path);
  if (!m->dwarf()) return make_error(Errc::kBadFormat, fmt::format("{}: no DWARF in it", path));
  return {};
}

}  // namespace lr
