#include "kernels/prefetch_policy.hpp"

#include "kernels/units/cpu_features.hpp"

namespace kvscope {

bool prefetch_single_query_rows() { return !cpu_features().amd; }

bool prefetch_in_page_runs() { return !cpu_features().amd; }

bool prefetch_in_groups() { return !cpu_features().amd; }

bool prefetch_shared_blocks_to_l1() { return cpu_features().amd; }

bool prefetch_block_after_next() { return cpu_features().amd; }

bool prefetch_weight_rows() { return !cpu_features().amd; }

}  // namespace kvscope
