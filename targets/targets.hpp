// The one place that knows every target: registers each with the engine
// (allocators, container kinds, dump readers). A program built on the engine
// calls register_targets() once before it opens a dump; later calls do
// nothing.
#pragma once

namespace lr {

void register_targets();

}  // namespace lr
