// `batch run --slurm` and the `batch worker` each array task runs.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frontend/batch/batch.hpp"
#include "frontend/batch/batch_db.hpp"

namespace lrcli {

struct SlurmOptions {
  std::string work;       // shared directory for the run files (dump lists, results)
  std::string partition;  // "" for the cluster's default
  size_t chunk = 8;       // dumps per array task
  // Called once the array is submitted (job id, tasks).
  std::function<void(const std::string&, size_t)> on_submit;
};

// Stores every result an earlier or this run's tasks wrote under `work`,
// calling `stored` for each one new to the database, and removes the run
// directories merged. Refused while an earlier run's job is still in Slurm.
lr::Result<uint64_t> merge_slurm_results(const std::string& work, BatchDb& db, int64_t run,
                                         const std::function<void(const nlohmann::json&)>& stored);
// Submits `todo` as a job array and waits until Slurm no longer lists it.
lr::Result<void> submit_slurm(const std::vector<DumpFile>& todo, const SlurmOptions& so,
                              const BatchOptions& o, int64_t run);
// `leakref batch worker`: dumps [task*chunk, (task+1)*chunk) of `list`,
// results appended to `out`. Returns an exit code.
int worker_main(const std::string& list, size_t task, size_t chunk, const std::string& out,
                const BatchOptions& o);

}  // namespace lrcli
