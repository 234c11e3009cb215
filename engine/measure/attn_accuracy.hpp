#pragma once
// Accuracy of a cache format beside its speed: one decode step over the same K/V data held
// in a cache of the format and in an f32 cache.
#include <cstddef>
#include <cstdint>

#include "engine/measure/kv_data.hpp"
#include "kernels/isa.hpp"
#include "kernels/kv_dtype.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope {

struct AttnAccuracy {
  double rel_error = 0;  // max |O − O_f32| / max |O_f32| over all heads
  double weight_kl = 0;  // mean over query heads of KL(p_f32 ‖ p), nats
};

struct AttnAccuracyRequest {
  std::int64_t n_heads = 32, n_kv_heads = 32, head_dim = 128, tokens = 2000;
  KvTypes types = KvDtype::f32;
  KvData data = KvData::realistic;
  Isa isa = Isa::scalar;
  ComputeMode compute = ComputeMode::exact;
  int threads = 1;
  std::uint64_t seed = 1;
};

// The decode step of one query at position tokens − 1 over `data` (engine/measure/kv_data.hpp)
// stored as `types`, against the same step over the same data stored as f32. O comes from
// attend() on the request's ISA and compute mode (the kernel that is timed), O_f32 from the
// exact path on the same ISA. The attention weights p are computed in float64 from the stored
// keys (softmax(q · k / sqrt(d))), so the KL column shows what K's format does to the weights.
// f32 gives 0 and 0.
AttnAccuracy measure_attn_accuracy(const AttnAccuracyRequest& request);

}  // namespace kvscope
