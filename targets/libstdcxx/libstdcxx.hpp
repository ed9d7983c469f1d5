// GNU libstdc++'s standard containers as one container kind, "std": a walk
// from a global (or any place) of type std::vector, std::list,
// std::forward_list, std::map, std::set (and their multi forms) or an
// unordered one gives the container's elements, typed by the container's
// own template parameters. Every layout comes from the program's DWARF and
// the containers' member names (_M_impl._M_start, _M_t._M_impl._M_header,
// _M_h._M_before_begin, ...); a node's element follows its base part at the
// element type's alignment (libstdc++'s __aligned_membuf), both read from
// the DWARF.
#pragma once

#include "corelib/registry/target.hpp"

namespace lr {

TargetSpec libstdcxx_target();

}  // namespace lr
