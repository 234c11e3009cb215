#pragma once
// Attention over a cache whose keys and values have different types, or int4 rows: the
// score stage reads K with K's type and the p·V stage reads V with V's type, with no kernel
// per (K, V) pair. Each block of 64 keys is widened into f32 tiles by the K type's and the
// V type's widener (function pointers chosen once per call), then the f32 tile kernels of
// attention_block*.hpp run over them. int8 row scales stay on the scores and the weights, as
// in the same-type kernels; int4 group scales are applied while widening.
//
// Include only from ISA-flagged translation units (kernels/arch/).
#include <cstddef>

#include "kernels/attention_decode.hpp"
#include "kernels/attention_kernels.hpp"
#include "kernels/attention_prefill.hpp"
#include "kernels/formats/int4_simd.hpp"

namespace kvscope::simd {

// Widens rows [0, n) of one cache block (row r at src + r · row bytes of its type) into an f32
// tile with rows of nv·W lanes, zero past head_dim d; prefetches rows [0, n_next) of next.
template <class A>
using WidenBlock = void (*)(const std::byte* src, std::size_t d, std::size_t n, std::size_t nv,
                            float* tile, const std::byte* next, std::size_t n_next);

template <class A, KvDtype D>
void widen_block(const std::byte* src, std::size_t d, std::size_t n, std::size_t nv, float* tile,
                 const std::byte* next, std::size_t n_next) {
  if constexpr (D == KvDtype::int4) {
    widen_rows_int4<A>(src, d, n, nv, tile, next, n_next);
  } else {
    widen_rows<A, D>(reinterpret_cast<const elem_t<D>*>(src), d, n, nv, tile,
                     reinterpret_cast<const elem_t<D>*>(next), n_next);
  }
}

// The widener of type t on A.
template <class A>
WidenBlock<A> widen_block_for(KvDtype t) {
  switch (t) {
    case KvDtype::f32:
      return &widen_block<A, KvDtype::f32>;
    case KvDtype::f16:
      return &widen_block<A, KvDtype::f16>;
    case KvDtype::bf16:
      return &widen_block<A, KvDtype::bf16>;
    case KvDtype::int8:
      return &widen_block<A, KvDtype::int8>;
    case KvDtype::int4:
      return &widen_block<A, KvDtype::int4>;
  }
  return nullptr;
}

// The scales of rows [b0, b0 + nb) of kv head kvh from `scales` (null: none), readable for
// kKeyBlock lanes: in place for a full block, else a zero-padded copy into pad.
template <class A>
const float* tile_scales(const float* own, std::size_t nb, float* pad) {
  if (own == nullptr) return nullptr;
  if (nb == kKeyBlock) return own;
  copy_scales<A>(own, nb, kKeyBlock, pad);
  return pad;
}

// KeyRunner (attention_decode.hpp's contract) that widens each block with the K and V
// wideners it holds; always through tiles.
template <class A>
class TiledKeys {
 public:
  TiledKeys(WidenBlock<A> widen_k, WidenBlock<A> widen_v) : widen_k_(widen_k), widen_v_(widen_v) {}

  void run(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
           std::size_t count, std::size_t nv, bool /*direct*/, const DecodeScratch<A>& ws) const {
    constexpr std::size_t W = fbatch<A>::size;
    const std::size_t d = kv.head_dim;
    for (std::size_t b0 = t0, nb; b0 < t1; b0 += nb) {
      nb = kv.block_rows(b0, t1, kKeyBlock);
      const NextBlock next = NextBlock::within(kv, kvh, b0, nb, t1, kKeyBlock, ws.after_range);
      if (kv.paged()) next.prefetch_scales();
      widen_k_(kv.k_row(kvh, b0), d, nb, nv, ws.k_tile, next.k, next.rows);
      widen_v_(kv.v_row(kvh, b0), d, nb, nv, ws.v_tile, next.v, next.rows);
      const KeyBlock<KvDtype::f32> blk{ws.k_tile,
                                       ws.v_tile,
                                       nv * W,
                                       b0,
                                       nb,
                                       tile_scales<A>(kv.k_scales(kvh, b0), nb, ws.k_scale),
                                       tile_scales<A>(kv.v_scales(kvh, b0), nb, ws.v_scale)};
      attend_block_all<A, KvDtype::f32, false>(st, count, blk, nv, ws);
    }
  }

 private:
  WidenBlock<A> widen_k_, widen_v_;
};

template <class A>
inline constexpr bool kRunsPageByPage<TiledKeys<A>> = true;

// Decode and prefill (attend()'s contract) for any K and V types on A, through tiles.
template <class A>
void attend_decode_tiled(const AttentionProblem& p, int threads) {
  const WidenBlock<A> k = widen_block_for<A>(p.kv.k_dtype), v = widen_block_for<A>(p.kv.v_dtype);
  decode_with<A>(p, threads, false, [&](std::size_t, std::size_t) { return TiledKeys<A>(k, v); });
}
template <class A>
void attend_prefill_tiled(const AttentionProblem& p, int threads) {
  const WidenBlock<A> k = widen_block_for<A>(p.kv.k_dtype), v = widen_block_for<A>(p.kv.v_dtype);
  prefill_with<A>(p, threads, false, [&](std::size_t, std::size_t) { return TiledKeys<A>(k, v); });
}

}  // namespace kvscope::simd
