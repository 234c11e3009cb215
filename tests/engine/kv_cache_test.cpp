#include "engine/kv_cache.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kv_layout.hpp"
#include "engine/kv_page_pool.hpp"
#include "engine/layer_weights.hpp"
#include "kernels/ref/kv_row_ref.hpp"

namespace kvscope {
namespace {

bool aligned64(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }

std::vector<float> random_rows(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  fill_uniform(v, seed, -2.0f, 2.0f);
  return v;
}

std::vector<float> stored_k(const KvCache& cache, std::size_t h, std::size_t pos) {
  const KvView view = cache.view();
  std::vector<float> row(view.head_dim);
  decode_row_ref(view.k_dtype, view.k_row(h, pos), view.k_row_scale(h, pos), view.head_dim,
                 row.data());
  return row;
}

TEST(KvCache, HeadBlocksAre64ByteAlignedAndRowsInPositionOrder) {
  for (KvTypes types :
       {KvTypes(KvDtype::f32), KvTypes(KvDtype::f16), KvTypes(KvDtype::bf16),
        KvTypes(KvDtype::int8), KvTypes(KvDtype::int4), KvTypes(KvDtype::int8, KvDtype::f16),
        KvTypes(KvDtype::int4, KvDtype::f32)}) {
    KvCache cache(3, 10, 7, types);  // odd sizes: blocks need padding to stay aligned
    const KvView view = cache.view();
    for (std::size_t h = 0; h < 3; ++h) {
      EXPECT_TRUE(aligned64(view.k_row(h, 0))) << to_string(types);
      EXPECT_TRUE(aligned64(view.v_row(h, 0))) << to_string(types);
      EXPECT_EQ(view.k_row(h, 1) - view.k_row(h, 0),
                static_cast<std::ptrdiff_t>(kv_row_bytes(types.k, 10)));
      EXPECT_EQ(view.v_row(h, 1) - view.v_row(h, 0),
                static_cast<std::ptrdiff_t>(kv_row_bytes(types.v, 10)));
    }
    EXPECT_GE(view.k_head_stride_bytes, 7 * kv_row_bytes(types.k, 10));
    EXPECT_GE(view.v_head_stride_bytes, 7 * kv_row_bytes(types.v, 10));
    EXPECT_EQ(view.k_scale != nullptr, types.k == KvDtype::int8) << to_string(types);
    EXPECT_EQ(view.v_scale != nullptr, types.v == KvDtype::int8) << to_string(types);
  }
}

TEST(KvCache, F32StoresRowsExactlyPerHead) {
  KvCache cache(2, 4, 5, KvDtype::f32);
  const std::vector<float> k = random_rows(3 * 2 * 4, 1), v = random_rows(3 * 2 * 4, 2);
  cache.append(k.data(), v.data(), 3);
  EXPECT_EQ(cache.size(), 3u);
  const KvView view = cache.view();
  for (std::size_t pos = 0; pos < 3; ++pos) {
    for (std::size_t h = 0; h < 2; ++h) {
      const auto* krow = reinterpret_cast<const float*>(view.k_row(h, pos));
      const auto* vrow = reinterpret_cast<const float*>(view.v_row(h, pos));
      for (std::size_t j = 0; j < 4; ++j) {
        EXPECT_EQ(krow[j], k[(pos * 2 + h) * 4 + j]);
        EXPECT_EQ(vrow[j], v[(pos * 2 + h) * 4 + j]);
      }
    }
  }
}

TEST(KvCache, AppendPastCapacityThrowsAndKeepsWhatIsStored) {
  KvCache cache(1, 4, 3, KvDtype::f32);
  const std::vector<float> k = random_rows(4 * 4, 3), v = random_rows(4 * 4, 4);
  cache.append(k.data(), v.data(), 2);
  const std::vector<float> before = stored_k(cache, 0, 1);
  try {
    cache.append(k.data(), v.data(), 2);
    FAIL() << "appended past capacity";
  } catch (const std::length_error& e) {
    EXPECT_NE(std::string(e.what()).find("holds 2 of 3 tokens"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(stored_k(cache, 0, 1), before);
  cache.append(k.data(), v.data(), 1);  // exactly to capacity still works
  EXPECT_EQ(cache.size(), 3u);
}

TEST(KvCache, RingKeepsTheLastCapacityTokensWithTheirScales) {
  for (KvDtype dtype : {KvDtype::f32, KvDtype::int8}) {
    KvCache cache(2, 8, 3, dtype);  // a ring of 3 rows per kv head
    const std::vector<float> k = random_rows(5 * 2 * 8, 1), v = random_rows(5 * 2 * 8, 2);
    cache.append_ring(k.data(), v.data(), 2);
    cache.append_ring(k.data() + 2 * 16, v.data() + 2 * 16, 3);  // tokens 2, 3, 4
    EXPECT_EQ(cache.size(), 3u);
    // Token t sits in row t mod 3: rows hold 3, 4, 2.
    for (std::size_t h = 0; h < 2; ++h) {
      for (std::size_t t : {2u, 3u, 4u}) {
        const std::vector<float> want(k.begin() + (t * 2 + h) * 8, k.begin() + (t * 2 + h + 1) * 8);
        const std::vector<float> got = stored_k(cache, h, t % 3);
        for (std::size_t i = 0; i < 8; ++i) EXPECT_NEAR(got[i], want[i], 0.02) << to_string(dtype);
      }
    }
  }
}

TEST(KvCache, RejectsZeroSizesAndImpossibleCapacity) {
  EXPECT_THROW(KvCache(0, 4, 3, KvDtype::f32), std::invalid_argument);
  EXPECT_THROW(KvCache(1, 0, 3, KvDtype::f32), std::invalid_argument);
  EXPECT_THROW(KvCache(1, 4, 0, KvDtype::f32), std::invalid_argument);
  try {
    KvCache(32, 128, std::size_t{1} << 40, KvDtype::f32);
    FAIL() << "allocated a cache larger than memory";
  } catch (const std::length_error& e) {
    EXPECT_NE(std::string(e.what()).find("needs"), std::string::npos) << e.what();
  }
}

// Round-trip error per element is bounded by the format's step: half an ulp of the
// element for f16 (2^-11 relative) and bf16 (2^-8 relative), half a quantization step
// (scale / 2 = absmax / 254) for int8.
TEST(KvCache, ReducedPrecisionRoundTripWithinTheFormatStep) {
  const std::size_t d = 64;
  for (KvDtype dtype : {KvDtype::f16, KvDtype::bf16, KvDtype::int8}) {
    KvCache cache(2, d, 4, dtype);
    const std::vector<float> k = random_rows(4 * 2 * d, 7), v = random_rows(4 * 2 * d, 8);
    cache.append(k.data(), v.data(), 4);
    for (std::size_t pos = 0; pos < 4; ++pos) {
      for (std::size_t h = 0; h < 2; ++h) {
        const float* src = k.data() + (pos * 2 + h) * d;
        float absmax = 0;
        for (std::size_t j = 0; j < d; ++j) absmax = std::max(absmax, std::fabs(src[j]));
        const std::vector<float> got = stored_k(cache, h, pos);
        for (std::size_t j = 0; j < d; ++j) {
          const float bound = dtype == KvDtype::f16    ? std::fabs(src[j]) * 0x1p-11f + 0x1p-25f
                              : dtype == KvDtype::bf16 ? std::fabs(src[j]) * 0x1p-8f
                                                       : absmax / 254.0f * 1.0001f;
          EXPECT_LE(std::fabs(got[j] - src[j]), bound) << to_string(dtype) << " j=" << j;
        }
      }
    }
  }
}

// A cache filled in many calls (chunks of 1, 3, 64 and 65 tokens, as a prefill followed by
// decode steps fills it) stores exactly what one call stores: every K and V byte and, for
// int8, every scale at its own (head, position) slot. A scale written at the row index
// within the call instead of the position in the cache, or past the previous tokens, differs.
TEST(KvCache, AppendedInManyCallsEqualsOneCallForEveryType) {
  const std::size_t n_kv = 3, d = 24, tokens = 3 + 64 + 1 + 65 + 1 + 3 + 1;  // 138
  const std::size_t chunks[] = {3, 64, 1, 65, 1, 3, 1};
  const std::vector<float> k = random_rows(tokens * n_kv * d, 21);
  const std::vector<float> v = random_rows(tokens * n_kv * d, 22);
  for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::int8, KvDtype::int4}) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    KvCache whole(n_kv, d, tokens + 5, dtype), pieces(n_kv, d, tokens + 5, dtype);
    whole.append(k.data(), v.data(), tokens);
    std::size_t done = 0;
    for (std::size_t n : chunks) {
      pieces.append(k.data() + done * n_kv * d, v.data() + done * n_kv * d, n);
      done += n;
      EXPECT_EQ(pieces.size(), done);
    }
    ASSERT_EQ(done, tokens);
    const KvView a = whole.view(), b = pieces.view();
    for (std::size_t h = 0; h < n_kv; ++h) {
      for (std::size_t pos = 0; pos < tokens; ++pos) {
        EXPECT_EQ(0, std::memcmp(a.k_row(h, pos), b.k_row(h, pos), a.k_row_bytes()))
            << "K head " << h << " pos " << pos;
        EXPECT_EQ(0, std::memcmp(a.v_row(h, pos), b.v_row(h, pos), a.v_row_bytes()))
            << "V head " << h << " pos " << pos;
        EXPECT_EQ(a.k_row_scale(h, pos), b.k_row_scale(h, pos)) << "head " << h << " pos " << pos;
        EXPECT_EQ(a.v_row_scale(h, pos), b.v_row_scale(h, pos)) << "head " << h << " pos " << pos;
        if (kv_has_scales(dtype)) {
          // Each scale is its own row's absmax / 127 (rows differ, so a neighbour's is wrong).
          const float* src = k.data() + (pos * n_kv + h) * d;
          float absmax = 0;
          for (std::size_t j = 0; j < d; ++j) absmax = std::max(absmax, std::fabs(src[j]));
          EXPECT_FLOAT_EQ(b.k_row_scale(h, pos), absmax / 127) << "head " << h << " pos " << pos;
        }
      }
    }
  }
}

TEST(KvCache, Int8AllZeroRowHasScaleZeroAndDecodesToZero) {
  KvCache cache(1, 8, 2, KvDtype::int8);
  const std::vector<float> zeros(8, 0.0f);
  cache.append(zeros.data(), zeros.data(), 1);
  EXPECT_EQ(cache.view().k_row_scale(0, 0), 0.0f);
  for (float x : stored_k(cache, 0, 0)) {
    EXPECT_EQ(x, 0.0f);
    EXPECT_FALSE(std::isnan(x));
  }
}

TEST(KvCache, Int8ScaleIsAbsmaxOver127AndExtremesAreExact) {
  KvCache cache(1, 4, 1, KvDtype::int8);
  const std::vector<float> k{-2.54f, 1.0f, 0.0f, 2.0f}, v{1, 1, 1, 1};
  cache.append(k.data(), v.data(), 1);
  EXPECT_FLOAT_EQ(cache.view().k_row_scale(0, 0), 2.54f / 127);
  const auto* q = reinterpret_cast<const std::int8_t*>(cache.view().k_row(0, 0));
  EXPECT_EQ(q[0], -127);
  EXPECT_EQ(q[1], 50);
  EXPECT_EQ(q[2], 0);
  EXPECT_EQ(q[3], 100);
}

// Paged: rows land in pages of the pool, each part of a page on a 64-byte line, found through
// the table; pages are taken as tokens arrive and given back on clear() and destruction.
TEST(KvCachePaged, RowsAndScalesThroughThePageTable) {
  for (KvTypes types :
       {KvTypes(KvDtype::f32), KvTypes(KvDtype::int8), KvTypes(KvDtype::int4, KvDtype::int8)}) {
    SCOPED_TRACE(to_string(types));
    auto pool = std::make_shared<KvPagePool>(KvPageGeometry(3, 10, 4, types));
    KvCache paged(3, 10, 11, types, pool);
    KvCache flat(3, 10, 11, types);
    EXPECT_EQ(paged.bytes(), 0u);
    const std::vector<float> k = random_rows(11 * 3 * 10, 5), v = random_rows(11 * 3 * 10, 6);
    paged.append(k.data(), v.data(), 6);
    paged.append(k.data() + 6 * 30, v.data() + 6 * 30, 5);
    flat.append(k.data(), v.data(), 11);
    EXPECT_EQ(pool->pages_in_use(), 3u);  // ⌈11 / 4⌉
    EXPECT_EQ(paged.bytes(), 3 * pool->geometry().page_bytes);
    const KvView view = paged.view();
    ASSERT_TRUE(view.paged());
    for (std::size_t pos = 0; pos < 11; ++pos) {
      for (std::size_t h = 0; h < 3; ++h) {
        EXPECT_TRUE(aligned64(view.k_row(h, pos - pos % 4)));
        EXPECT_TRUE(aligned64(view.v_row(h, pos - pos % 4)));
        EXPECT_EQ(stored_k(paged, h, pos), stored_k(flat, h, pos)) << "pos " << pos;
        EXPECT_EQ(0, std::memcmp(view.v_row(h, pos), flat.view().v_row(h, pos),
                                 kv_row_bytes(types.v, 10)));
        EXPECT_EQ(view.v_row_scale(h, pos), flat.view().v_row_scale(h, pos));
      }
    }
    // A block per head: its keys, values and scales in one run, the page's heads one after
    // another (so a page read a head at a time is one stream).
    const KvPageGeometry& g = pool->geometry();
    const auto at = [&](const void* p) {
      return static_cast<std::size_t>(static_cast<const std::byte*>(p) - view.pages[1]);
    };
    EXPECT_EQ(g.page_bytes, 3 * g.k_head_stride);
    for (std::size_t h = 0; h < 3; ++h) {
      EXPECT_EQ(at(view.k_row(h, 4)), h * g.k_head_stride);
      EXPECT_EQ(at(view.v_row(h, 4)), h * g.k_head_stride + g.v_offset);
      EXPECT_GE(g.v_offset, 4 * kv_row_bytes(types.k, 10));
      for (const float* scales : {view.k_scales(h, 4), view.v_scales(h, 4)}) {
        if (scales == nullptr) continue;
        EXPECT_GE(at(scales), h * g.k_head_stride + g.v_offset + 4 * kv_row_bytes(types.v, 10));
        EXPECT_LE(at(scales + 4), (h + 1) * g.k_head_stride);
      }
    }
    // Blocks stop at page ends; the last holds what is left.
    EXPECT_EQ(view.block_rows(0, 11, 64), 4u);
    EXPECT_EQ(view.block_rows(5, 11, 64), 3u);
    EXPECT_EQ(view.block_rows(8, 11, 64), 3u);
    EXPECT_EQ(view.block_rows(8, 11, 2), 2u);
    EXPECT_EQ(view.block_rows(11, 11, 64), 0u);
    const KvCache copy = paged.clone();
    EXPECT_EQ(pool->pages_in_use(), 6u);
    EXPECT_EQ(stored_k(copy, 2, 10), stored_k(flat, 2, 10));
    paged.clear();
    EXPECT_EQ(pool->pages_in_use(), 3u);
    EXPECT_EQ(paged.size(), 0u);
  }
}

// Tokens split over threads (a prefill's append) store the bytes and scales of the scalar
// reference encoding each row alone, at every (head, position): contiguous and paged, in one
// call and as a ring given more tokens than it has rows (only the last ones stay, each in
// the slot a token-by-token append puts it).
TEST(KvCache, AppendedOnThreadsEqualsTheReferenceRowByRow) {
  const std::size_t n_kv = 3, d = 40, tokens = 138, ring = 40;
  const std::vector<float> k = random_rows(tokens * n_kv * d, 31);
  const std::vector<float> v = random_rows(tokens * n_kv * d, 32);
  for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::int8, KvDtype::int4}) {
    const std::size_t row_bytes = kv_row_bytes(dtype, d);
    // The reference's row for token t, head h, and its scale.
    const auto expected = [&](const std::vector<float>& x, std::size_t t, std::size_t h) {
      std::vector<std::byte> row(row_bytes);
      const float scale = encode_row_ref(dtype, x.data() + (t * n_kv + h) * d, d, row.data());
      return std::make_pair(row, kv_has_scales(dtype) ? scale : 1.0f);
    };
    const auto check = [&](const KvCache& cache, std::size_t slot, std::size_t t) {
      const KvView view = cache.view();
      for (std::size_t h = 0; h < n_kv; ++h) {
        const auto [k_row, k_scale] = expected(k, t, h);
        const auto [v_row, v_scale] = expected(v, t, h);
        EXPECT_EQ(0, std::memcmp(view.k_row(h, slot), k_row.data(), row_bytes))
            << "K head " << h << " slot " << slot;
        EXPECT_EQ(0, std::memcmp(view.v_row(h, slot), v_row.data(), row_bytes))
            << "V head " << h << " slot " << slot;
        EXPECT_EQ(view.k_row_scale(h, slot), k_scale) << "head " << h << " slot " << slot;
        EXPECT_EQ(view.v_row_scale(h, slot), v_scale) << "head " << h << " slot " << slot;
      }
    };
    for (int threads : {2, 3, 7}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + ", " + std::to_string(threads) + " threads");
      auto pool = std::make_shared<KvPagePool>(KvPageGeometry(n_kv, d, 16, dtype));
      KvCache flat(n_kv, d, tokens, dtype), paged(n_kv, d, tokens, dtype, pool);
      flat.append(k.data(), v.data(), tokens, threads);
      paged.append(k.data(), v.data(), tokens, threads);
      KvCache flat_ring(n_kv, d, ring, dtype), paged_ring(n_kv, d, ring, dtype, pool);
      flat_ring.append_ring(k.data(), v.data(), 7, threads);  // then 131 more: 3.3 laps
      flat_ring.append_ring(k.data() + 7 * n_kv * d, v.data() + 7 * n_kv * d, tokens - 7, threads);
      paged_ring.append_ring(k.data(), v.data(), tokens, threads);
      for (std::size_t t = 0; t < tokens; ++t) {
        check(flat, t, t);
        check(paged, t, t);
      }
      for (std::size_t t = tokens - ring; t < tokens; ++t) {
        check(flat_ring, t % ring, t);
        check(paged_ring, t % ring, t);
      }
      EXPECT_EQ(flat_ring.size(), ring);
      EXPECT_EQ(paged_ring.size(), ring);
    }
  }
}

TEST(KvCachePaged, PagesReturnToThePoolAndFullRingsStopTaking) {
  auto pool = std::make_shared<KvPagePool>(KvPageGeometry(2, 8, 16, KvDtype::f32));
  const std::vector<float> k = random_rows(100 * 16, 7), v = random_rows(100 * 16, 8);
  {
    KvCache a(2, 8, 40, KvDtype::f32, pool);
    a.append_ring(k.data(), v.data(), 100);  // a ring of 40 rows: 3 pages, never more
    EXPECT_EQ(a.size(), 40u);
    EXPECT_EQ(pool->pages_in_use(), 3u);
    KvCache b = std::move(a);  // the pages move with the cache, once
    EXPECT_EQ(pool->pages_in_use(), 3u);
    KvCache flat(2, 8, 40, KvDtype::f32);
    flat.append_ring(k.data(), v.data(), 100);
    for (std::size_t slot = 0; slot < 40; ++slot)
      EXPECT_EQ(stored_k(b, 1, slot), stored_k(flat, 1, slot)) << "slot " << slot;
  }
  EXPECT_EQ(pool->pages_in_use(), 0u);
  KvCache c(2, 8, 3, KvDtype::f32, pool);
  c.append(k.data(), v.data(), 3);
  EXPECT_THROW(c.append(k.data(), v.data(), 1), std::length_error);
  EXPECT_EQ(c.size(), 3u);
  // A pool of another shape is refused by name.
  EXPECT_THROW(KvCache(2, 9, 3, KvDtype::f32, pool), std::invalid_argument);
  EXPECT_THROW(KvCache(2, 8, 3, KvDtype::int8, pool), std::invalid_argument);
  EXPECT_THROW(KvPageGeometry(2, 8, 0, KvDtype::f32), std::invalid_argument);
}

// A pool's slabs fill 4 MiB with whole pages, so they stop just short of it (31 int8 pages of
// 32 heads × 16 rows of d_head 128); they still take huge pages, as a contiguous cache does:
// on 4 KiB pages MHA int8 decode over pages of 16 took 1.5x the contiguous step.
TEST(KvCachePaged, SlabsStartOnA2MiBBoundary) {
  KvPagePool pool(KvPageGeometry(32, 128, 16, KvDtype::int8));
  const std::size_t per_slab = (std::size_t{4} << 20) / pool.geometry().page_bytes;
  ASSERT_EQ(per_slab, 31u);
  std::vector<std::byte*> pages;
  for (std::size_t i = 0; i < per_slab; ++i) pages.push_back(pool.take());
  EXPECT_EQ(pool.bytes_allocated(), per_slab * pool.geometry().page_bytes);
  const std::byte* first = *std::min_element(pages.begin(), pages.end());  // pages are shuffled
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % (std::size_t{2} << 20), 0u);
  for (std::byte* page : pages) pool.give_back(page);
}

TEST(KvLayout, ParsesAndNamesLayouts) {
  EXPECT_EQ(parse_kv_layout("contiguous"), KvLayout{});
  EXPECT_EQ(parse_kv_layout("paged:16").page_tokens, 16u);
  EXPECT_EQ(to_string(KvLayout{16}), "paged:16");
  EXPECT_EQ(to_string(KvLayout{}), "contiguous");
  for (const char* bad : {"paged", "paged:", "paged:0", "paged:-3", "paged:1x", "paged:65537",
                          "paged:99999999999999999999", "Paged:16", ""}) {
    try {
      parse_kv_layout(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace kvscope
