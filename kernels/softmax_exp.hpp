#pragma once
// e^x for a softmax's shifted scores, x = s − m ≤ 0 (−inf for a masked key), on any ISA:
// 2^(x · log2 e) = 2^n · 2^f with f ∈ [−½, ½], 2^f by the Cephes exp2f polynomial (relative
// error ~2e-7, as xsimd::exp's), 2^n written into the exponent bits. Below −87 (e^x < 1.7e-38,
// under FLT_MIN's neighbourhood) the result is 0: an absolute error under 1.7e-38 beside a
// block maximum's weight of 1, and masked keys weigh exactly 0. NaN stays NaN. About half of
// xsimd::exp's instructions, which also handles x > 0 and subnormal results; the softmax of
// MQA f32 decode spent 5% of the step in it (perf, AMD Zen 4). The AVX-512 dot kernels'
// exp_nonpositive (units/dot_unit_attention.hpp) is the same polynomial on intrinsics.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <xsimd/xsimd.hpp>

namespace kvscope::simd {

// 2^f for f ∈ [−½, ½] (Cephes exp2f), highest power first, for Horner's rule; shared with
// exp_nonpositive.
inline constexpr float kExp2Polynomial[] = {1.535336188319500e-4f,
                                            1.339887440266574e-3f,
                                            9.618437357674640e-3f,
                                            5.550332471162809e-2f,
                                            2.402264791363012e-1f,
                                            6.931472028550421e-1f,
                                            1.0f};

// 2^f for f ∈ [−½, ½] to 7.5e-5 relative (degree 3, fitted for the least largest relative
// error), highest power first: the dot units' weights, which they then round to bf16 (2^-9
// relative) or quantize to 8 bits, steps 25 times larger.
inline constexpr float kExp2ForWeights[] = {5.517209529e-02f, 2.426133120e-01f, 6.932611107e-01f,
                                            9.999279534e-01f};

template <class A>
xsimd::batch<float, A> softmax_exp(xsimd::batch<float, A> x) {
  using B = xsimd::batch<float, A>;
  using I = xsimd::batch<std::int32_t, A>;
  constexpr float kLowest = -87.0f;  // × log2 e = −125.5: 2^n stays a normal number
  const auto below = x < B(kLowest);
  // A select, not max(): max would turn a NaN score into e^−87 (a key silently dropped).
  const B t = xsimd::select(below, B(kLowest), x) * B(1.44269504088896341f);
  const B n = xsimd::nearbyint(t);
  const B f = t - n;
  B p(kExp2Polynomial[0]);
  for (std::size_t i = 1; i < std::size(kExp2Polynomial); ++i)
    p = xsimd::fma(p, f, B(kExp2Polynomial[i]));
  const I exponent = (xsimd::to_int(n) + I(127)) << 23;
  const B r = p * xsimd::bitwise_cast<B>(exponent);
  return xsimd::select(below, B(0.0f), r);
}

}  // namespace kvscope::simd
