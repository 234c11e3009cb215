#pragma once
// Encoding K and V rows into the cache's element types on SIMD units: the bytes and scale of
// encode_row_ref (kernels/ref/kv_row_ref.hpp), bit for bit, for every input. Appending a
// 2,000-token MHA prefill to an int8 cache through the scalar reference took as long as the
// prefill's attention itself (AMD Zen 5: 33 ms, a libm nearbyint per element; f16 15 ms);
// here 2.0 ms on one thread, 1.0 on two (bench/kv_append_bench).
#include <cstddef>
#include <xsimd/xsimd.hpp>

#include "kernels/isa.hpp"
#include "kernels/kv_dtype.hpp"

namespace kvscope {

// encode_row_ref's contract: stores `n` floats as `dtype` at `dst`, returns the int8 scale
// (else 1).
using EncodeRowFn = float (*)(KvDtype dtype, const float* src, std::size_t n, std::byte* dst);

// The encoder for `isa` (which the CPU must support): SIMD where the ISA has vectors, the
// scalar reference for Isa::scalar. Rows holding a NaN or an infinity, and int4 rows whose
// last group is short, go to the reference on every ISA.
EncodeRowFn encode_row_for(Isa isa);

namespace simd {

template <class A>
float encode_row_arch(KvDtype dtype, const float* src, std::size_t n, std::byte* dst);

#define KVSCOPE_KV_ENCODE_KERNELS(PREFIX, ARCH) \
  PREFIX template float encode_row_arch<ARCH>(KvDtype, const float*, std::size_t, std::byte*);

KVSCOPE_KV_ENCODE_KERNELS(extern, xsimd::avx512bw)
KVSCOPE_KV_ENCODE_KERNELS(extern, xsimd::fma3<xsimd::avx2>)
KVSCOPE_KV_ENCODE_KERNELS(extern, xsimd::sse2)

}  // namespace simd
}  // namespace kvscope
