// libstdc++'s shared_ptr control blocks for the engine's census
// (walks/shared_layouts.hpp): std::_Sp_counted_ptr_inplace (make_shared),
// std::_Sp_counted_ptr (shared_ptr<T>(new T)) and std::_Sp_counted_deleter,
// all derived from std::_Sp_counted_base<policy>, whose _M_use_count and
// _M_weak_count are ints holding the counts themselves.
#pragma once

#include "corelib/walks/shared_layouts.hpp"

namespace lr {

SharedLayout libstdcxx_shared_layout();

}  // namespace lr
