// AMX-BF16 batch projection (kernels/weights/gemm_bf16_amx.hpp). Built with the AMX flags;
// entered only where CPUID reports AMX-BF16 and Linux granted tile data.
#include "kernels/weights/gemm_bf16_amx.hpp"

#include <cstdint>
#include <memory>

#include "kernels/number_formats.hpp"
#include "kernels/units/amx_tiles.hpp"
#include "kernels/weights/gemm_shape_error.hpp"
#include "kernels/weights/gemv_bf16_dot.hpp"

namespace kvscope {
namespace {

using simd::tile_dp_bf16;
using simd::tile_load;
using simd::tile_store;
using simd::tile_zero;

constexpr std::size_t kStep = 32;          // K elements per tile product (16 bf16 pairs)
constexpr std::size_t kBlock = 16;         // W rows per A tile
constexpr std::size_t kPrefetchSteps = 8;  // W lines requested this many steps ahead

// Tiles: C0, C1 (two blocks of 16 W rows × 16 batch columns, f32), A0, A1 (their W rows),
// B0, B1 (x, alternated between steps: a tile reloaded while a product reads it waits).
// One group of 32 W rows (two_blocks) or 16: C += A · B over every step of K.
template <bool TwoBlocks>
void group_products(const std::uint16_t* w0, std::size_t k, const std::uint32_t* xt,
                    std::size_t steps) {
  const std::size_t stride = k * sizeof(std::uint16_t);
  const std::uint16_t* w1 = w0 + kBlock * k;
  const auto prefetch = [&](std::size_t s) {
    if (s + kPrefetchSteps >= steps) return;
    for (std::size_t r = 0; r < kBlock; ++r) {
      __builtin_prefetch(w0 + r * k + (s + kPrefetchSteps) * kStep, 0, 2);
      if constexpr (TwoBlocks) __builtin_prefetch(w1 + r * k + (s + kPrefetchSteps) * kStep, 0, 2);
    }
  };
  const auto step = [&]<int B>(std::size_t s) {
    prefetch(s);
    tile_load<B>(xt + s * kBlock * kBlock, kBlock * sizeof(std::uint32_t));
    tile_load<2>(w0 + s * kStep, stride);
    tile_dp_bf16<0, 2, B>();
    if constexpr (TwoBlocks) {
      tile_load<3>(w1 + s * kStep, stride);
      tile_dp_bf16<1, 3, B>();
    }
  };
  tile_zero<0>();
  if constexpr (TwoBlocks) tile_zero<1>();
  std::size_t s = 0;
  for (; s + 2 <= steps; s += 2) {
    step.template operator()<4>(s);
    step.template operator()<5>(s + 1);
  }
  if (s < steps) step.template operator()<4>(s);
}

// y[b · n + first + i] ← C[i][b] for b < m (the tile holds W rows × batch columns).
template <int C>
void store_block(float* c, float* y, std::size_t m, std::size_t n, std::size_t first) {
  tile_store<C>(c, kBlock * sizeof(float));
  for (std::size_t b = 0; b < m; ++b) {
    for (std::size_t i = 0; i < kBlock; ++i) y[b * n + first + i] = c[i * kBlock + b];
  }
}

}  // namespace

bool gemm_bf16_amx_fits(std::size_t m, const WeightsView& w) {
  return w.dtype == WeightDtype::bf16 && m >= 2 && m <= kAmxBatchRows && w.cols % kStep == 0 &&
         w.cols > 0;
}

void gemm_bf16_amx(const float* x, std::size_t m, const WeightsView& w, float* y, int threads) {
  if (!gemm_bf16_amx_fits(m, w)) {
    static_assert(kStep == 32 && kAmxBatchRows == 16, "the message below names them");
    throw_gemm_shape_error("gemm_bf16_amx",
                           "bf16 weights with columns a multiple of 32 and 2 to 16 rows of x", m,
                           w.rows, w.cols);
  }
  const std::size_t k = w.cols, n = w.rows, steps = k / kStep;
  // x as B tiles: step s, row p holds the pair (x[b][32s + 2p], x[b][32s + 2p + 1]) of every
  // column b (even element in the low half); columns past m are 0.
  // Plain arrays, not std::vectors: no template code compiled with these flags may be shared
  // with units built for other CPUs.
  const std::unique_ptr<std::uint32_t[]> xt(new std::uint32_t[steps * kBlock * kBlock]());
  for (std::size_t b = 0; b < m; ++b) {
    for (std::size_t e = 0; e < k; e += 2) {
      const std::uint32_t lo = f32_to_bf16_bits(x[b * k + e]);
      const std::uint32_t hi = f32_to_bf16_bits(x[b * k + e + 1]);
      xt[((e / kStep) * kBlock + (e % kStep) / 2) * kBlock + b] = lo | hi << 16;
    }
  }
  const auto* wd = static_cast<const std::uint16_t*>(w.data);
  const std::size_t full_rows = n / kBlock * kBlock;
  const auto groups = static_cast<long>((full_rows / kBlock + 1) / 2);
#pragma omp parallel num_threads(threads)
  {
    simd::TileConfig config;
    for (int t = 0; t < 6; ++t) config.set(t, kBlock, 64);
    alignas(64) float c[kBlock * kBlock];
    const simd::TileScope scope(config);
#pragma omp for schedule(static)
    for (long g = 0; g < groups; ++g) {
      const std::size_t first = static_cast<std::size_t>(g) * 2 * kBlock;
      if (first + 2 * kBlock <= full_rows) {
        group_products<true>(wd + first * k, k, xt.get(), steps);
        store_block<0>(c, y, m, n, first);
        store_block<1>(c, y, m, n, first + kBlock);
      } else {
        group_products<false>(wd + first * k, k, xt.get(), steps);
        store_block<0>(c, y, m, n, first);
      }
    }
  }
  if (full_rows < n) {  // W's last rows, short of a tile: into a scratch, then into y
    const WeightsView tail{wd + full_rows * k, WeightDtype::bf16, n - full_rows, k};
    const std::unique_ptr<float[]> part(new float[m * tail.rows]);
    gemm_bf16_dot(x, m, tail, part.get(), 1);
    for (std::size_t b = 0; b < m; ++b) {
      for (std::size_t i = 0; i < tail.rows; ++i)
        y[b * n + full_rows + i] = part[b * tail.rows + i];
    }
  }
}

}  // namespace kvscope
