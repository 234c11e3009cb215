#pragma once
// The per-ISA attention kernels, as the dispatching unit and the tests see them: declarations
// and `extern template`s only (xsimd 8.1 needs the instantiations declared where they are
// called). Definitions: attention_decode.hpp, attention_prefill.hpp; instantiations, compiled
// with each ISA's flags: kernels/arch/.
#include <type_traits>
#include <xsimd/xsimd.hpp>

#include "kernels/attention.hpp"
#include "kernels/kv_dtype.hpp"

namespace kvscope::simd {

using avx2_fma = xsimd::fma3<xsimd::avx2>;

// Decode (p.n_queries == 1) and prefill (any n_queries ≥ 1) on architecture A for a cache of
// element type D; same contract as attend(). The caller checks the CPU supports A.
template <class A, KvDtype D>
void attend_decode(const AttentionProblem& p, int threads);
template <class A, KvDtype D>
void attend_prefill(const AttentionProblem& p, int threads);

#define KVSCOPE_ATTENTION_KERNELS(PREFIX, ARCH, DTYPE)                                    \
  PREFIX template void attend_decode<ARCH, KvDtype::DTYPE>(const AttentionProblem&, int); \
  PREFIX template void attend_prefill<ARCH, KvDtype::DTYPE>(const AttentionProblem&, int);
#define KVSCOPE_ATTENTION_KERNELS_ALL_DTYPES(PREFIX, ARCH) \
  KVSCOPE_ATTENTION_KERNELS(PREFIX, ARCH, f32)             \
  KVSCOPE_ATTENTION_KERNELS(PREFIX, ARCH, f16)             \
  KVSCOPE_ATTENTION_KERNELS(PREFIX, ARCH, bf16)            \
  KVSCOPE_ATTENTION_KERNELS(PREFIX, ARCH, int8)

KVSCOPE_ATTENTION_KERNELS_ALL_DTYPES(extern, xsimd::avx512bw)
KVSCOPE_ATTENTION_KERNELS_ALL_DTYPES(extern, avx2_fma)
KVSCOPE_ATTENTION_KERNELS_ALL_DTYPES(extern, xsimd::sse2)

// One attention call on architecture A: picks the kernel for the cache type and the number of
// queries once. A = fma3<avx2> with an f16 cache on a CPU without F16C runs the SSE2 kernel.
template <class A>
void attend_arch(const AttentionProblem& p, int threads) {
  if (p.n_queries == 0) return;
  if (threads < 1) threads = 1;
  const auto run = [&]<KvDtype D>() {
    if (p.n_queries == 1) {
      attend_decode<A, D>(p, threads);
    } else {
      attend_prefill<A, D>(p, threads);
    }
  };
  switch (p.kv.dtype) {
    case KvDtype::f32:
      return run.template operator()<KvDtype::f32>();
    case KvDtype::f16:
      if constexpr (std::is_same_v<A, avx2_fma>) {
        // The AVX2 f16 kernels use F16C, which cpu_supports(Isa::avx2) does not check.
        if (!__builtin_cpu_supports("f16c")) return attend_arch<xsimd::sse2>(p, threads);
      }
      return run.template operator()<KvDtype::f16>();
    case KvDtype::bf16:
      return run.template operator()<KvDtype::bf16>();
    case KvDtype::int8:
      return run.template operator()<KvDtype::int8>();
  }
}

}  // namespace kvscope::simd
