#include "kernels/units/compute_unit.hpp"

#include <chrono>
#include <stdexcept>
#include <string>

#include "kernels/prefetch_policy.hpp"
#include "kernels/roofline.hpp"
#include "kernels/units/amx_kernels.hpp"
#include "kernels/units/cpu_features.hpp"
#include "kernels/units/dot_unit_kernels.hpp"

namespace kvscope {
namespace {

// Operations per second of `burn` on one thread, best of a few short runs (~1 ms each).
template <class Burn>
double ops_per_second(Burn burn) {
  double best = 0.0;
  for (int run = 0; run < 5; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    const double ops = burn(20000);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0 && ops / s > best) best = ops / s;
  }
  return best;
}

// Measured once on one thread: bf16 dot products against f32 FMAs, in multiply-adds per
// second. The widening path needs no rounding of query and weights, so the dot unit must win
// clearly (1.2×) to be chosen.
bool bf16_dot_outruns_fma() {
  static const bool faster = [] {
    const double dot =
        ops_per_second([](std::size_t n) { return dot_burn(ComputeUnit::avx512_bf16, n, 1); });
    const double fma = ops_per_second([](std::size_t n) { return fma_burn(n, Isa::avx512, 1); });
    return dot > 1.2 * fma;
  }();
  return faster;
}

}  // namespace

std::string_view to_string(ComputeMode mode) {
  return mode == ComputeMode::fast ? "fast" : "exact";
}

std::string_view to_string(ComputeUnit unit) {
  switch (unit) {
    case ComputeUnit::fp32_fma:
      return "fp32-fma";
    case ComputeUnit::vnni_int8:
      return "vnni-int8";
    case ComputeUnit::avx512_bf16:
      return "avx512-bf16";
    case ComputeUnit::amx_int8:
      return "amx-int8";
    case ComputeUnit::amx_bf16:
      return "amx-bf16";
  }
  return "?";
}

ComputeMode parse_compute_mode(std::string_view name) {
  if (name == "exact") return ComputeMode::exact;
  if (name == "fast") return ComputeMode::fast;
  throw std::invalid_argument("unknown compute mode '" + std::string(name) +
                              "' (expected exact or fast)");
}

bool cpu_has(ComputeUnit unit) {
  const bool avx512 = cpu_supports(Isa::avx512);
  switch (unit) {
    case ComputeUnit::fp32_fma:
      return avx512 || cpu_supports(Isa::avx2);
    case ComputeUnit::vnni_int8:
      return avx512 && cpu_features().avx512_vnni;
    case ComputeUnit::avx512_bf16:
      return avx512 && cpu_features().avx512_bf16;
    // The AMX kernels use AVX-512 with VNNI and BF16 around the tiles (every AMX CPU has them).
    case ComputeUnit::amx_int8:
      return avx512 && cpu_features().amx_int8 && cpu_features().avx512_vnni &&
             cpu_features().avx512_bf16;
    case ComputeUnit::amx_bf16:
      return avx512 && cpu_features().amx_bf16 && cpu_features().avx512_vnni &&
             cpu_features().avx512_bf16;
  }
  return false;
}

ComputeUnit attention_compute_unit(KvTypes types, Isa isa, ComputeMode mode, std::size_t sharing,
                                   std::size_t head_dim, std::size_t page_tokens) {
  if (mode == ComputeMode::exact || isa != Isa::avx512 || !types.same()) {
    return ComputeUnit::fp32_fma;
  }
  const KvDtype dtype = types.k;
  const bool whole_groups = kv_row_bytes(dtype, head_dim) % 4 == 0;
  if (dtype == KvDtype::int8 && sharing >= kAmxMinSharing && whole_groups &&
      cpu_has(ComputeUnit::amx_int8)) {
    return ComputeUnit::amx_int8;
  }
  if (dtype == KvDtype::bf16 && sharing >= kAmxMinSharing && whole_groups &&
      cpu_has(ComputeUnit::amx_bf16)) {
    return ComputeUnit::amx_bf16;
  }
  // f16 on AMX-BF16 as hi and lo bf16 parts (amx_f16_split.hpp): any head_dim.
  if (dtype == KvDtype::f16 && sharing >= kAmxMinSharing && cpu_has(ComputeUnit::amx_bf16)) {
    return ComputeUnit::amx_bf16;
  }
  if (dtype == KvDtype::int4 && cpu_has(ComputeUnit::vnni_int8)) {
    return ComputeUnit::vnni_int8;
  }
  // One query per kv head of a contiguous cache on a CPU that streams its rows without
  // software prefetches: the widening kernel then reads faster than VNNI (which quantizes each
  // block's weights and interleaves its values). Zen 4, MHA int8 decode, 2 threads, cold:
  // 0.66-0.76x VNNI's time at 2,000 tokens, 0.66-0.79x at 32,768. Over pages shorter than its
  // block of 64 keys too, since it requests their parts 8 KiB ahead (attention_decode.hpp):
  // Zen 5, pages of 16, 1.04-1.10x the contiguous step against VNNI's 1.23-1.33x, pages of 32
  // 1.11-1.20x against 1.15-1.33x. Pages of 64 and 128 keep VNNI (128: 1.09-1.13x against
  // the widening kernel's 1.20-1.24x). From 256 (a head's rows of a page are runs of 32 KiB
  // or more, read as a contiguous cache's) the widening kernel again: Zen 5, 2 threads, cold,
  // chunks of whole pages, at 2,000 / 32,768 tokens, pages of 256 1.15x / 1.19x the contiguous
  // step against VNNI's 1.21x / 1.23x, 512 1.09x / 1.11x against 1.16x / 1.20x, 1,024 1.07x /
  // 1.07x against 1.12x / 1.16x.
  // Zen 4, whose L1 data cache (32 KiB against Zen 5's 48) is how the two AMD cores are told
  // apart here, not a cause shown: the widening kernel at every page size. 2 threads, cold,
  // 2026-12-07, MHA int8 steps of both alternated in one process, widening / VNNI: pages of 64
  // 0.83x the time (2,000 tokens) and 0.85x (32,768), pages of 128 0.80x and 0.82x. Warm (the
  // cache in L3, not how a model's step reads it) VNNI stays faster: widening 1.08x, 1.09x.
  constexpr std::size_t kWideningPagesBelow = 64, kWideningPagesFrom = 256;
  const bool vnni_mid_pages = cpu_features().l1d_kib >= 48;
  const bool widening_pages =
      page_tokens < kWideningPagesBelow || page_tokens >= kWideningPagesFrom || !vnni_mid_pages;
  const bool widening_streams = sharing == 1 && widening_pages && !prefetch_single_query_rows();
  if (dtype == KvDtype::int8 && cpu_has(ComputeUnit::vnni_int8) && !widening_streams) {
    return ComputeUnit::vnni_int8;
  }
  if (dtype == KvDtype::bf16 && sharing >= kBf16DotMinSharing &&
      cpu_has(ComputeUnit::avx512_bf16) && bf16_dot_outruns_fma()) {
    return ComputeUnit::avx512_bf16;
  }
  return ComputeUnit::fp32_fma;
}

double dot_burn(ComputeUnit unit, std::size_t iterations, int threads) {
  if (threads < 1) threads = 1;
  if (!cpu_has(unit)) {
    throw std::invalid_argument("compute unit '" + std::string(to_string(unit)) +
                                "' is not available on this CPU");
  }
  switch (unit) {
    case ComputeUnit::fp32_fma:
      return fma_burn(iterations, cpu_supports(Isa::avx512) ? Isa::avx512 : Isa::avx2, threads);
    case ComputeUnit::vnni_int8:
      return simd::vnni_burn(iterations, threads);
    case ComputeUnit::avx512_bf16:
      return simd::bf16_dot_burn(iterations, threads);
    case ComputeUnit::amx_int8:
      return simd::amx_burn_arch<simd::avx512_amx, true>(iterations, threads);
    case ComputeUnit::amx_bf16:
      return simd::amx_burn_arch<simd::avx512_amx, false>(iterations, threads);
  }
  return 0.0;
}

double amx_bf16_fed_burn(std::size_t iterations, bool products) {
  if (!cpu_has(ComputeUnit::amx_bf16)) {
    throw std::invalid_argument("compute unit 'amx-bf16' is not available on this CPU");
  }
  return simd::amx_fed_burn_arch<simd::avx512_amx>(iterations, products);
}

}  // namespace kvscope
