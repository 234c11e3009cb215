#pragma once
// Causal attention of a block of new query rows over a KV cache: the entry point the
// engine calls for prefill (n queries) and decode (one query).
#include <cstddef>

#include "kernels/isa.hpp"
#include "kernels/kv_view.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope {

// Query i sits at position first_pos + i and reads keys [0, first_pos + i] (causal mask:
// later keys are never read). Query head h reads kv head h / (n_heads / kv.n_kv_heads),
// so MHA, GQA and MQA are one problem. Scores are scaled by 1/sqrt(kv.head_dim).
struct AttentionProblem {
  const float* q = nullptr;  // [n_queries × n_heads × head_dim], RoPE applied
  std::size_t n_queries = 0;
  std::size_t first_pos = 0;
  std::size_t n_heads = 0;
  KvView kv;             // holds keys and values for positions [0, first_pos + n_queries)
  float* out = nullptr;  // [n_queries × n_heads × head_dim]
};

// Computes out = softmax(q kᵀ / sqrt(d) + causal mask) v for every query and head on the
// given ISA with up to `threads` OpenMP threads. mode fast runs int8 and bf16 caches (keys and
// values of the same type) on the CPU's dot-product units where attention_compute_unit()
// picks one (compute_unit.hpp); other caches run exact.
void attend(const AttentionProblem& problem, Isa isa, int threads,
            ComputeMode mode = ComputeMode::exact);

}  // namespace kvscope
