// The roofline SVG from fixed rows: one point per row where its intensity and GFLOP/s put it,
// the bandwidth roof and every measured compute roof, everything inside the picture.
#include "tools/roofline_svg.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvscope::cli {
namespace {

// MHA/MQA × f32/int8 at 2,000 and 8,192 tokens: 32 heads × d_head 128, f32 K/V 1,024 bytes
// per token per kv head, int8 rows on VNNI.
std::vector<ReportRow> rows() {
  std::vector<ReportRow> out;
  for (std::int64_t tokens : {2000, 8192}) {
    for (std::int64_t kv : {32, 1}) {
      for (KvDtype dtype : {KvDtype::f32, KvDtype::int8}) {
        ReportRow r{.variant = kv == 32 ? "MHA" : "MQA",
                    .n_heads = 32,
                    .n_kv_heads = kv,
                    .head_dim = 128,
                    .tokens = tokens,
                    .kv_dtype = dtype,
                    .isa = Isa::avx512};
        r.compute_unit = dtype == KvDtype::int8 ? ComputeUnit::vnni_int8 : ComputeUnit::fp32_fma;
        r.bytes_read_per_step =
            static_cast<std::uint64_t>(tokens * kv * (dtype == KvDtype::int8 ? 264 : 1024));
        r.flops_per_step = static_cast<std::uint64_t>(4 * 32 * 128 * tokens);
        r.attn_seconds_median = 1e-7 * static_cast<double>(tokens * kv);
        r.read_bandwidth_gbps = kv == 32 ? 40 : 60;  // median 50 over the 8 rows
        r.fma_peak_gflops = 400;
        r.compute_peak_gops = dtype == KvDtype::int8 ? 1800 : 400;
        out.push_back(r);
      }
    }
  }
  return out;
}

std::vector<std::smatch> all(const std::string& svg, const std::string& pattern) {
  std::vector<std::smatch> found;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it) {
    found.push_back(*it);
  }
  return found;
}

TEST(RooflineSvg, OnePointPerRowAtItsIntensityAndGflops) {
  const std::vector<ReportRow> in = rows();
  const std::string svg = roofline_svg(in);
  const auto points = all(svg,
                          "<g class=\"point\" data-label=\"([^\"]+)\" data-intensity=\"([0-9.]+)\" "
                          "data-gflops=\"([0-9.]+)\">\n<circle cx=\"([0-9.]+)\" cy=\"([0-9.]+)\"");
  ASSERT_EQ(points.size(), in.size()) << svg;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const ReportRow& r = in[i];
    EXPECT_EQ(points[i][1], r.variant + " " + std::string(to_string(r.kv_dtype)) + " " +
                                std::to_string(r.tokens));
    const double flops = static_cast<double>(r.flops_per_step);
    EXPECT_NEAR(std::stod(points[i][2]), flops / static_cast<double>(r.bytes_read_per_step), 1e-4);
    EXPECT_NEAR(std::stod(points[i][3]), flops / r.attn_seconds_median / 1e9, 1e-4);
  }
  // Higher intensity lies further right, higher GFLOP/s further up (SVG y grows downwards):
  // MHA f32 2000 (0.5 FLOP/B, 163.8 GFLOP/s) against MQA f32 2000 (16 FLOP/B, 5,243 GFLOP/s).
  EXPECT_LT(std::stod(points[0][4]), std::stod(points[2][4]));
  EXPECT_GT(std::stod(points[0][5]), std::stod(points[2][5]));
  // Every label's text is there, once per row.
  for (const auto& p : points) {
    EXPECT_NE(svg.find(">" + p[1].str() + "</text>"), std::string::npos) << p[1];
  }
}

TEST(RooflineSvg, BandwidthRoofAndEveryComputeRoof) {
  const std::string svg = roofline_svg(rows());
  const auto bandwidth = all(svg, "class=\"roof bandwidth\" data-gbps=\"([0-9.]+)\"");
  ASSERT_EQ(bandwidth.size(), 1u);
  EXPECT_DOUBLE_EQ(std::stod(bandwidth[0][1]), 50.0);  // median of 40 and 60
  EXPECT_NE(svg.find("read loop 50.0 GB/s"), std::string::npos);
  const auto compute =
      all(svg, "class=\"roof compute\" data-unit=\"([a-z0-9-]+)\" data-gops=\"([0-9.]+)\"");
  ASSERT_EQ(compute.size(), 2u) << svg;
  EXPECT_EQ(compute[0][1], "fp32-fma");
  EXPECT_DOUBLE_EQ(std::stod(compute[0][2]), 400);
  EXPECT_EQ(compute[1][1], "vnni-int8");
  EXPECT_DOUBLE_EQ(std::stod(compute[1][2]), 1800);
  EXPECT_NE(svg.find("vnni-int8 1800 GOP/s"), std::string::npos);
}

TEST(RooflineSvg, EveryCoordinateIsInsideThePicture) {
  const std::string svg = roofline_svg(rows());
  int coordinates = 0;
  for (const auto& m : all(svg, " (x|x1|x2|cx)=\"(-?[0-9.]+)\"")) {
    EXPECT_GE(std::stod(m[2]), 0) << m[0];
    EXPECT_LE(std::stod(m[2]), 900) << m[0];
    ++coordinates;
  }
  for (const auto& m : all(svg, " (y|y1|y2|cy)=\"(-?[0-9.]+)\"")) {
    EXPECT_GE(std::stod(m[2]), 0) << m[0];
    EXPECT_LE(std::stod(m[2]), 540) << m[0];
    ++coordinates;
  }
  EXPECT_GT(coordinates, 50);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(RooflineSvg, NoMeasuredRowIsAnError) {
  std::vector<ReportRow> none = rows();
  for (ReportRow& r : none) r.attn_seconds_median = 0;
  EXPECT_THROW(roofline_svg(none), std::invalid_argument);
  EXPECT_THROW(roofline_svg({}), std::invalid_argument);
}

}  // namespace
}  // namespace kvscope::cli
