// AMX-BF16 prefill projection (kernels/weights/gemm_bf16_amx_blocked.hpp). Built with the AMX
// flags; entered only where CPUID reports AMX-BF16 and Linux granted tile data.
#include "kernels/weights/gemm_bf16_amx_blocked.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/attention_block.hpp"
#include "kernels/units/amx_tiles.hpp"
#include "kernels/weights/gemm_shape_error.hpp"

namespace kvscope {
namespace {

using simd::tile_dp_bf16;
using simd::tile_load;
using simd::tile_store;
using simd::tile_zero;

constexpr std::size_t kStep = 32;                  // K elements per tile product
constexpr std::size_t kTile = 16;                  // rows of a tile, f32 columns of a C tile
constexpr std::size_t kTileWords = kTile * kTile;  // 32-bit words in a tile
constexpr std::size_t kTileBf16 = 2 * kTileWords;  // bf16 elements in a tile (one KiB)
constexpr std::size_t kPair = 2 * kTile;           // rows of x, and of W, per 2 × 2 tile group

// 16 floats rounded to bf16 as f32_to_bf16_bits rounds them: to nearest even, NaN kept quiet.
__m256i round_to_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i high = _mm512_srli_epi32(u, 16);
  const __m512i bias =
      _mm512_add_epi32(_mm512_and_si512(high, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fff));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  const __m512i quiet = _mm512_or_si512(high, _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet));
}

// x rounded to bf16 in A-tile order: per pair of 32 rows and per step of 32 columns, the
// tile of rows 0–15 then that of rows 16–31, each 16 rows × 64 bytes, so that every A tile
// is one contiguous KiB (x's own rows lie k · 2 bytes apart: a tile's 16 rows in 16 pages).
// Rows from m up to `padded` are zeros.
std::size_t a_tile_offset(std::size_t r, std::size_t step, std::size_t steps) {
  return ((r / kPair * steps + step) * 2 + r % kPair / kTile) * kTileBf16 + r % kTile * kStep;
}

void round_rows(const float* x, std::size_t m, std::size_t k, std::size_t padded,
                std::uint16_t* out) {
  const std::size_t steps = k / kStep;
#pragma omp for schedule(static)
  for (long r = 0; r < static_cast<long>(padded); ++r) {
    const auto row = static_cast<std::size_t>(r);
    const float* in = x + row * k;
    for (std::size_t s = 0; s < steps; ++s) {
      std::uint16_t* dst = out + a_tile_offset(row, s, steps);
      if (row >= m) {
        std::memset(dst, 0, kStep * sizeof(std::uint16_t));
        continue;
      }
      for (std::size_t i = 0; i < kStep; i += kTile) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                            round_to_bf16(_mm512_loadu_ps(in + s * kStep + i)));
      }
    }
  }
}

// One B tile: dst[p · 16 + j] ← the 32-bit pair (2p, 2p + 1) of W row j, the 16 rows `stride`
// bytes apart from src. A 16 × 16 transpose of 32-bit words in four rounds of shuffles.
void pack_b_tile(const std::uint16_t* src, std::size_t stride, std::uint32_t* dst) {
  __m512i r[kTile], t[kTile];
  const auto* bytes = reinterpret_cast<const char*>(src);
  for (std::size_t j = 0; j < kTile; ++j) r[j] = _mm512_loadu_si512(bytes + j * stride);
  for (std::size_t j = 0; j < kTile; j += 2) {  // words of row pairs interleaved
    t[j] = _mm512_unpacklo_epi32(r[j], r[j + 1]);
    t[j + 1] = _mm512_unpackhi_epi32(r[j], r[j + 1]);
  }
  for (std::size_t j = 0; j < kTile; j += 4) {  // then pairs of words of row quads
    r[j] = _mm512_unpacklo_epi64(t[j], t[j + 2]);
    r[j + 1] = _mm512_unpackhi_epi64(t[j], t[j + 2]);
    r[j + 2] = _mm512_unpacklo_epi64(t[j + 1], t[j + 3]);
    r[j + 3] = _mm512_unpackhi_epi64(t[j + 1], t[j + 3]);
  }
  for (std::size_t j = 0; j < 8; ++j) {  // then 128-bit lanes of rows 4 apart
    const std::size_t a = j / 4 * 8 + j % 4;
    t[a] = _mm512_shuffle_i32x4(r[a], r[a + 4], 0x88);
    t[a + 4] = _mm512_shuffle_i32x4(r[a], r[a + 4], 0xdd);
  }
  for (std::size_t j = 0; j < 8; ++j) {  // and of rows 8 apart
    _mm512_storeu_si512(dst + j * kTile, _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88));
    _mm512_storeu_si512(dst + (j + 8) * kTile, _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd));
  }
}

// C[32 x rows × 32 W rows] (+)= A · B over `steps` steps: tiles 0–3 C (x row tile × W row
// tile), 4–5 A (the x row pair's tiles, a_tile_offset's order from `a`), 6–7 B (two packed W
// row tiles). C's rows are `c_stride` bytes apart; `accumulate` loads them first (a later
// block of K). Each step requests `lines` lines of `next` (the next row pair's A tiles).
void pair_products(const std::uint16_t* a, const std::uint32_t* b, std::size_t steps, float* c,
                   std::size_t c_stride, bool accumulate, simd::LinePrefetcher& next,
                   std::size_t lines) {
  float* c_low = c + kTile * (c_stride / sizeof(float));  // x rows 16–31
  if (accumulate) {
    tile_load<0>(c, c_stride);
    tile_load<1>(c + kTile, c_stride);
    tile_load<2>(c_low, c_stride);
    tile_load<3>(c_low + kTile, c_stride);
  } else {
    tile_zero<0>();
    tile_zero<1>();
    tile_zero<2>();
    tile_zero<3>();
  }
  constexpr std::size_t kRowBytes = kStep * sizeof(std::uint16_t);
  const std::uint32_t* b_second = b + steps * kTileWords;
  for (std::size_t s = 0; s < steps; ++s) {
    for (std::size_t l = 0; l < lines; ++l) next.next();
    const std::uint16_t* at = a + s * 2 * kTileBf16;
    tile_load<4>(at, kRowBytes);
    tile_load<6>(b + s * kTileWords, kTile * sizeof(std::uint32_t));
    tile_dp_bf16<0, 4, 6>();
    tile_load<7>(b_second + s * kTileWords, kTile * sizeof(std::uint32_t));
    tile_dp_bf16<1, 4, 7>();
    tile_load<5>(at + kTileBf16, kRowBytes);
    tile_dp_bf16<2, 5, 6>();
    tile_dp_bf16<3, 5, 7>();
  }
  tile_store<0>(c, c_stride);
  tile_store<1>(c + kTile, c_stride);
  tile_store<2>(c_low, c_stride);
  tile_store<3>(c_low + kTile, c_stride);
}

}  // namespace

bool gemm_bf16_amx_blocked_fits(std::size_t m, const WeightsView& w) {
  return w.dtype == WeightDtype::bf16 && m > kTile && w.cols % kStep == 0 && w.cols > 0 &&
         w.rows % kPair == 0 && w.rows > 0;
}

void gemm_bf16_amx_blocked(const float* x, std::size_t m, const WeightsView& w, float* y,
                           int threads, AmxGemmScratch& scratch) {
  if (!gemm_bf16_amx_blocked_fits(m, w)) {
    static_assert(kPair == 32 && kStep == 32 && kTile == 16, "the message below names them");
    throw_gemm_shape_error("gemm_bf16_amx_blocked",
                           "bf16 weights with rows and columns multiples of 32, and more than 16 "
                           "rows of x",
                           m, w.rows, w.cols);
  }
  const std::size_t k = w.cols, n = w.rows, padded = (m + kPair - 1) / kPair * kPair;
  const std::size_t k_steps = k / kStep;
  const std::size_t full = m / kPair * kPair;  // x rows whose C tiles are y's own rows
  const auto* wd = static_cast<const std::uint16_t*>(w.data);
  threads = std::max(1, threads);
  scratch.reserve(m, w, threads);
  std::uint16_t* const xb = scratch.x();
#pragma omp parallel num_threads(threads)
  {
    round_rows(x, m, k, padded, xb);  // ends on the loop's barrier
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const auto count = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t pairs = n / kPair;
    const std::size_t first = pairs * t / count * kPair, last = pairs * (t + 1) / count * kPair;
    std::uint32_t* const packed = scratch.packed(static_cast<int>(t));
    float* const tail = scratch.tail(static_cast<int>(t));
    simd::TileConfig config;
    for (int tile = 0; tile < 8; ++tile) config.set(tile, kTile, 64);
    const simd::TileScope scope(config);
    for (std::size_t k0 = 0; k0 < k && first < last; k0 += kAmxBlockSteps * kStep) {
      const std::size_t steps = std::min(kAmxBlockSteps, (k - k0) / kStep);
      for (std::size_t n0 = first; n0 < last; n0 += kAmxBlockRows) {
        const std::size_t rows = std::min(kAmxBlockRows, last - n0);
        for (std::size_t block = 0; block < rows / kTile; ++block) {
          for (std::size_t s = 0; s < steps; ++s) {
            pack_b_tile(wd + (n0 + block * kTile) * k + k0 + s * kStep, k * sizeof(std::uint16_t),
                        packed + (block * steps + s) * kTileWords);
          }
        }
        // Where the group (r, j)'s C rows are: y's own, or the short last pair's scratch.
        const auto c_of = [&](std::size_t r, std::size_t j) {
          return r < full ? y + r * n + n0 + j : tail + n0 - first + j;
        };
        const auto c_stride = [&](std::size_t r) {
          return (r < full ? n : last - first) * sizeof(float);
        };
        // While a row pair's tiles meet the block's W row pairs, the next pair's tiles for
        // this block of K are requested into L2, a share per W row pair: read first from L3
        // by the tile loads, they held the first W row pair's products up.
        const std::size_t pair_bytes = steps * 2 * kTileBf16 * sizeof(std::uint16_t);
        const std::size_t groups = rows / kPair;
        const std::size_t lines = (pair_bytes / 64 + groups * steps - 1) / (groups * steps);
        for (std::size_t r = 0; r < padded; r += kPair) {
          const std::uint16_t* a = xb + a_tile_offset(r, k0 / kStep, k_steps);
          simd::LinePrefetcher next(
              r + kPair < padded ? xb + a_tile_offset(r + kPair, k0 / kStep, k_steps) : nullptr,
              pair_bytes);
          for (std::size_t j = 0; j < rows; j += kPair) {
            const std::uint32_t* b = packed + j / kTile * steps * kTileWords;
            pair_products(a, b, steps, c_of(r, j), c_stride(r), k0 > 0, next, lines);
          }
          next.rest();
        }
      }
    }
    for (std::size_t r = full; r < m; ++r) {
      std::memcpy(y + r * n + first, tail + (r - full) * (last - first),
                  (last - first) * sizeof(float));
    }
  }
}

}  // namespace kvscope
