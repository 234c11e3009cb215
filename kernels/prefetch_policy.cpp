#include "kernels/prefetch_policy.hpp"

#include <atomic>

#include "kernels/units/cpu_features.hpp"

namespace kvscope {

namespace {
// -1: the CPU's answer; else the tests' (override_prefetch_single_query_rows).
std::atomic<int> single_query_rows_override{-1};
}  // namespace

bool prefetch_single_query_rows() {
  const int requested = single_query_rows_override.load(std::memory_order_relaxed);
  return requested >= 0 ? requested == 1 : !cpu_features().amd;
}

void override_prefetch_single_query_rows(std::optional<bool> requested) {
  single_query_rows_override.store(requested ? int{*requested} : -1, std::memory_order_relaxed);
}

bool prefetch_in_page_runs() { return !cpu_features().amd; }

bool prefetch_in_groups() { return !cpu_features().amd; }

bool prefetch_shared_blocks_to_l1() {
  return cpu_features().amd && cpu_features().l1d_kib >= 48;
}

bool prefetch_block_after_next() { return cpu_features().amd; }

bool prefetch_weight_rows() { return !cpu_features().amd; }

}  // namespace kvscope
