#pragma once
// The relative step of a stored KV-cache element, shared by the accuracy tests.
#include "kernels/kv_dtype.hpp"

namespace kvscope::test {

// |stored − x| ≤ step · |x| for f16 (2^-11) and bf16 (2^-8), both round to nearest; int8
// rounds x / scale to an integer, scale = absmax(row) / 127, so |stored − x| ≤ scale / 2 =
// absmax(row) / 254: step 1/254 relative to the row's absmax. f32: 0.
inline double format_step(KvDtype t) {
  switch (t) {
    case KvDtype::f32:
      return 0.0;
    case KvDtype::f16:
      return 0x1p-11;
    case KvDtype::bf16:
      return 0x1p-8;
    case KvDtype::int8:
      return 1.0 / 254.0;
    case KvDtype::int4:
      // Symmetric levels −7…7 per group of 32: scale = absmax(group) / 7 (rounded to f16,
      // then x / scale rounded to an integer), so |stored − x| ≤ scale / 2 ≈ absmax / 14,
      // relative to the group's absmax (≤ the row's). The f16 rounding of the scale adds at
      // most 2^-11 · 7 · scale at the clamped extremes, below the half step.
      return 1.0 / 14.0 * (1.0 + 0x1p-10);
  }
  return 0.0;
}

}  // namespace kvscope::test
