#pragma once
// Scalar reference encoding and decoding of one K or V row in any cache element type.
#include <cstddef>

#include "kernels/kv_dtype.hpp"

namespace kvscope {

// Stores `n` floats as `dtype` at `dst` (kv_row_bytes(dtype, n) bytes). For int8 returns the
// row's scale (absmax / 127; 0 for an all-zero row, which then decodes to 0); otherwise
// returns 1. int4 writes its group scales into the row (format in kv_row_ref.cpp).
float encode_row_ref(KvDtype dtype, const float* src, std::size_t n, std::byte* dst);

// dst[i] = element i of the stored row × scale (scale is 1 for non-int8 types; int4 reads its own
// group scales).
void decode_row_ref(KvDtype dtype, const std::byte* src, float scale, std::size_t n, float* dst);

}  // namespace kvscope
