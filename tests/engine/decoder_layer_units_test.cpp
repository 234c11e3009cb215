// The decoder layer with attention on the CPU's dot units (--compute fast: int8 caches on
// VNNI, bf16 caches on AVX512-BF16), against the independent float64 layer of tests/support:
// its error stays within 2× of the same cache's error on the exact path, for one prefill and
// for prefill/decode splits, GQA and MQA (where decode runs on the unit too).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/decoder_layer.hpp"
#include "support/reference_layer.hpp"

namespace kvscope {
namespace {

struct Shape {
  std::int64_t heads, kv_heads, head_dim;
};

// The layer on a cache of `dtype` in fast mode, prefilled through p rows and decoded after.
void check_layer(KvDtype dtype, const Shape& s) {
  const std::size_t n = 80, H = 64;  // past one 64-key block
  const LayerShape shape{.hidden_size = static_cast<std::int64_t>(H),
                         .n_heads = s.heads,
                         .n_kv_heads = s.kv_heads,
                         .head_dim = s.head_dim,
                         .ffn_size = 96,
                         .capacity = static_cast<std::int64_t>(n)};
  const LayerConfig c(shape);
  const LayerWeights w = LayerWeights::random(c, 17);
  std::vector<float> x(n * H);
  fill_uniform(x, 23, -1, 1);
  const std::vector<double> want = test::reference_layer(shape, w, x, n);

  DecoderLayer exact(c, w, {.kv_dtype = dtype, .isa = Isa::avx512, .threads = 2});
  const std::vector<float> exact_y = exact.prefill(x.data(), n);
  const double exact_error = test::relative_error(exact_y, want);
  for (std::size_t p : {n, n - 20, std::size_t{1}}) {
    SCOPED_TRACE("prefill " + std::to_string(p) + " of " + std::to_string(n));
    DecoderLayer fast(
        c, w, {.kv_dtype = dtype, .isa = Isa::avx512, .threads = 2, .compute = ComputeMode::fast});
    std::vector<float> y = fast.prefill(x.data(), p);
    for (std::size_t t = p; t < n; ++t) {
      const std::vector<float> row = fast.decode(x.data() + t * H);
      y.insert(y.end(), row.begin(), row.end());
    }
    const double fast_error = test::relative_error(y, want);
    const std::size_t group = static_cast<std::size_t>(s.heads / s.kv_heads);
    const auto unit = [&](std::size_t sharing) {
      return std::string(to_string(attention_compute_unit(
          dtype, Isa::avx512, ComputeMode::fast, sharing, static_cast<std::size_t>(s.head_dim))));
    };
    std::printf(
        "%s cache (prefill on %s, decode on %s), %lld/%lld heads: exact %.3g, fast %.3g "
        "(prefill %zu)\n",
        std::string(to_string(dtype)).c_str(), unit(p * group).c_str(), unit(group).c_str(),
        static_cast<long long>(s.heads), static_cast<long long>(s.kv_heads), exact_error,
        fast_error, p);
    EXPECT_LE(fast_error, 2.0 * exact_error);
    // The unit really ran: its rounding of query and weights shows in the output.
    float moved = 0.0f;
    for (std::size_t i = 0; i < y.size(); ++i)
      moved = std::max(moved, std::fabs(y[i] - exact_y[i]));
    EXPECT_GT(moved, 0.0f);
  }
}

// Each cache type whose prefill runs on a unit on this CPU (VNNI or AMX-INT8 for int8,
// AVX512-BF16 or AMX-BF16 for bf16); decode takes a unit from its own sharing on.
TEST(DecoderLayerUnits, WithinTwiceTheCacheFormatsErrorOfTheExactPath) {
  if (!cpu_supports(Isa::avx512)) GTEST_SKIP() << "CPU lacks AVX-512";
  int checked = 0;
  for (KvDtype dtype : {KvDtype::int8, KvDtype::bf16}) {
    const ComputeUnit unit = attention_compute_unit(dtype, Isa::avx512, ComputeMode::fast, 64, 64);
    if (unit == ComputeUnit::fp32_fma) {
      std::printf(
          "skipped %s: no unit of this CPU serves it (avx512_vnni, avx512_bf16 faster "
          "than FMAs, amx_int8, amx_bf16)\n",
          std::string(to_string(dtype)).c_str());
      continue;
    }
    for (const Shape& s : {Shape{8, 2, 40}, Shape{8, 1, 64}}) check_layer(dtype, s);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "CPU has no unit for int8 or bf16 caches";
}

}  // namespace
}  // namespace kvscope
