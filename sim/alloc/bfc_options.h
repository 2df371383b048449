// The BFC allocator's options, typed (sim/alloc/impl/bfc.h implements it):
// public because the XLA step's JAX-arena check (sim/step/step.cc) reads
// the arena size and preallocation JAX would use.
#ifndef GPUSIM_SIM_ALLOC_BFC_OPTIONS_H_
#define GPUSIM_SIM_ALLOC_BFC_OPTIONS_H_

#include "absl/status/statusor.h"
#include "sim/alloc/options.h"

namespace gpusim {

struct BfcOptions {
  bool preallocate = true;             // XLA_PYTHON_CLIENT_PREALLOCATE (allow_growth = !preallocate)
  double mem_fraction = 0.75;          // XLA_PYTHON_CLIENT_MEM_FRACTION
  bool garbage_collection = false;     // Options::garbage_collection: free whole free regions before OOM
  double fragmentation_fraction = 0;   // Options::fragmentation_fraction; 0: 128 MiB cap
};
// Parses allocator options for `impl: bfc`; errors name allocator.<key>.
absl::StatusOr<BfcOptions> ParseBfcOptions(const AllocatorOptions& options);

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_BFC_OPTIONS_H_
