#include "tools/roofline_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "engine/measure/decode_timing.hpp"
#include "tools/svg_frame.hpp"

namespace kvscope::cli {
namespace {

constexpr double kLabelFont = 11;
constexpr double kCharWidth = 6.2;  // average advance of an 11 px sans-serif character

struct Box {
  double x0, y0, x1, y1;
  bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

struct Point {
  double intensity, gflops;
  std::string label;
  std::string color;
};

// Coloured by the key type (a K:V pair takes its K's colour; int8 and int4 share green).
std::string dtype_color(KvTypes types) {
  switch (types.k) {
    case KvDtype::f32:
      return "#1f77b4";
    case KvDtype::f16:
      return "#9467bd";
    case KvDtype::bf16:
      return "#ff7f0e";
    default:
      return "#2ca02c";
  }
}

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

// Places a label of `width` × kLabelFont near (x, y): the first candidate position that stays
// inside the plot and overlaps no box taken so far (else the first inside the plot).
Box place_label(double x, double y, double width, const Box& plot, std::vector<Box>& taken) {
  const double h = kLabelFont + 2;
  std::vector<std::pair<double, double>> offsets;  // top-left corner relative to the point
  for (double dy : {0.0, -14.0, 14.0, -28.0, 28.0, -42.0, 42.0, -56.0, 56.0}) {
    offsets.emplace_back(7, dy - h / 2);
    offsets.emplace_back(-7 - width, dy - h / 2);
  }
  const Box* fallback = nullptr;
  std::vector<Box> candidates;
  for (auto [dx, dy] : offsets) candidates.push_back({x + dx, y + dy, x + dx + width, y + dy + h});
  for (const Box& c : candidates) {
    const bool inside = c.x0 >= plot.x0 && c.x1 <= plot.x1 && c.y0 >= plot.y0 && c.y1 <= plot.y1;
    if (!inside) continue;
    if (fallback == nullptr) fallback = &c;
    if (std::none_of(taken.begin(), taken.end(), [&](const Box& b) { return b.overlaps(c); })) {
      taken.push_back(c);
      return c;
    }
  }
  taken.push_back(fallback != nullptr ? *fallback : candidates.front());
  return taken.back();
}

}  // namespace

std::string roofline_svg(const std::vector<ReportRow>& rows) {
  std::vector<Point> points;
  std::vector<double> bandwidths;
  std::map<std::string, double> roofs;  // compute unit → measured peak, G operations/s
  for (const ReportRow& r : rows) {
    if (!(r.attn_seconds_median > 0) || r.bytes_read_per_step == 0 || r.flops_per_step == 0) {
      continue;
    }
    const double flops = static_cast<double>(r.flops_per_step);
    points.push_back({flops / static_cast<double>(r.bytes_read_per_step),
                      flops / r.attn_seconds_median / 1e9,
                      r.variant + " " + to_string(r.kv_dtype) + " " + std::to_string(r.tokens),
                      dtype_color(r.kv_dtype)});
    if (r.read_bandwidth_gbps > 0) bandwidths.push_back(r.read_bandwidth_gbps);
    if (r.fma_peak_gflops > 0)
      roofs[std::string(to_string(ComputeUnit::fp32_fma))] = r.fma_peak_gflops;
    if (r.compute_peak_gops > 0)
      roofs[std::string(to_string(r.compute_unit))] = r.compute_peak_gops;
  }
  if (points.empty() || bandwidths.empty() || roofs.empty()) {
    throw std::invalid_argument("nothing to plot: no row has a measured step, bytes and FLOPs");
  }
  const double bandwidth = median(bandwidths);
  double x_min = HUGE_VAL, x_max = 0, y_min = HUGE_VAL, y_max = 0;
  for (const Point& p : points) {
    x_min = std::min(x_min, p.intensity), x_max = std::max(x_max, p.intensity);
    y_min = std::min(y_min, p.gflops), y_max = std::max(y_max, p.gflops);
  }
  for (const auto& [unit, peak] : roofs) {
    x_max = std::max(x_max, peak / bandwidth * 2);  // every ridge point inside, with room
    y_max = std::max(y_max, peak * 1.6);            // room for the roof's label above it
  }
  x_min = std::min(x_min / 2, bandwidth > 0 ? y_min / bandwidth : x_min);
  y_min = std::min(y_min / 2, bandwidth * x_min);
  PlotArea area;
  area.right = 40;
  const LogLogMap m{area, LogAxis(x_min, x_max), LogAxis(y_min, y_max)};
  const auto n = svg_number;
  std::string title = "Roofline: decode attention";
  if (!rows.empty()) {
    title += ", " + std::to_string(rows.front().n_heads) + " query heads × d_head " +
             std::to_string(rows.front().head_dim) + " (" +
             std::string(to_string(rows.front().isa)) + ", " +
             std::to_string(rows.front().threads) + " threads)";
  }
  std::string svg = svg_frame(m, title, "arithmetic intensity (FLOPs per byte of K/V read)",
                              "achieved GFLOP/s (FLOPs ÷ median step)");
  const Box plot{area.left, area.top, area.left + area.plot_width(), area.top + area.plot_height()};
  const double x_lo = m.x.lo, x_hi = m.x.hi;
  std::vector<Box> taken;
  // The bandwidth roof: y = bandwidth · x up to the highest compute roof.
  double top_peak = 0;
  for (const auto& [unit, peak] : roofs) top_peak = std::max(top_peak, peak);
  const double bw_x0 = std::max(x_lo, m.y.lo / bandwidth);
  const double bw_x1 = std::min(x_hi, top_peak / bandwidth);
  svg += "<g class=\"roof bandwidth\" data-gbps=\"" + format("%.3f", bandwidth) + "\">\n";
  svg += "<line x1=\"" + n(m.px(bw_x0)) + "\" y1=\"" + n(m.py(bandwidth * bw_x0)) + "\" x2=\"" +
         n(m.px(bw_x1)) + "\" y2=\"" + n(m.py(bandwidth * bw_x1)) +
         "\" stroke=\"black\" stroke-width=\"2\"/>\n";
  // Its label lies along it, at the first place (from the left) clear of every point.
  const std::string bw_label = format("read loop %.1f GB/s", bandwidth);
  const double angle =
      std::atan2(m.py(bandwidth * bw_x1) - m.py(bandwidth * bw_x0), m.px(bw_x1) - m.px(bw_x0));
  const double half_w = kCharWidth * static_cast<double>(bw_label.size()) / 2, half_h = 8;
  const double ext_x = std::abs(half_w * std::cos(angle)) + std::abs(half_h * std::sin(angle));
  const double ext_y = std::abs(half_w * std::sin(angle)) + std::abs(half_h * std::cos(angle));
  std::vector<Box> markers;
  for (const Point& p : points) {
    markers.push_back(
        {m.px(p.intensity) - 5, m.py(p.gflops) - 5, m.px(p.intensity) + 5, m.py(p.gflops) + 5});
  }
  Box bw_box{};
  double cx = 0, cy = 0;
  for (double f = 0.12; f < 0.95; f += 0.04) {
    const double x = bw_x0 * std::pow(bw_x1 / bw_x0, f);
    // The text's centre, 9 units above the line (perpendicular to it).
    cx = m.px(x) + 9 * std::sin(angle);
    cy = m.py(bandwidth * x) - 9 * std::cos(angle);
    bw_box = {cx - ext_x, cy - ext_y, cx + ext_x, cy + ext_y};
    const bool inside = bw_box.x0 >= plot.x0 && bw_box.x1 <= plot.x1 && bw_box.y0 >= plot.y0 &&
                        bw_box.y1 <= plot.y1;
    if (inside && std::none_of(markers.begin(), markers.end(),
                               [&](const Box& b) { return b.overlaps(bw_box); })) {
      break;
    }
  }
  taken.push_back(bw_box);
  svg += "<text x=\"" + n(cx) + "\" y=\"" + n(cy + 4) +
         "\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(" + n(angle * 180 / M_PI) +
         " " + n(cx) + " " + n(cy) + ")\">" + bw_label + "</text>\n";
  svg += "</g>\n";
  // The compute roofs: flat from their ridge point on.
  for (const auto& [unit, peak] : roofs) {
    const double ridge = std::max(x_lo, peak / bandwidth);
    const double y = m.py(peak);
    svg += "<g class=\"roof compute\" data-unit=\"" + unit + "\" data-gops=\"" +
           format("%.3f", peak) + "\">\n";
    svg += "<line x1=\"" + n(m.px(ridge)) + "\" y1=\"" + n(y) + "\" x2=\"" + n(m.px(x_hi)) +
           "\" y2=\"" + n(y) +
           "\" stroke=\"#444444\" stroke-width=\"1.5\" stroke-dasharray=\"6 3\"/>\n";
    const std::string label = unit + format(" %.0f GOP/s", peak);
    const double width = kCharWidth * static_cast<double>(label.size());
    const Box box{m.px(x_hi) - 6 - width, y - 4 - kLabelFont, m.px(x_hi) - 6, y - 2};
    taken.push_back(box);
    svg += "<text x=\"" + n(box.x1) + "\" y=\"" + n(y - 5) +
           "\" font-size=\"12\" "
           "text-anchor=\"end\">" +
           svg_escape(label) + "</text>\n</g>\n";
  }
  // The points first (labels keep off every marker), then their labels.
  for (const Point& p : points) {
    taken.push_back(
        {m.px(p.intensity) - 5, m.py(p.gflops) - 5, m.px(p.intensity) + 5, m.py(p.gflops) + 5});
  }
  for (const Point& p : points) {
    const double x = m.px(p.intensity), y = m.py(p.gflops);
    const double width = kCharWidth * static_cast<double>(p.label.size());
    const Box b = place_label(x, y, width, plot, taken);
    svg += "<g class=\"point\" data-label=\"" + svg_escape(p.label) + "\" data-intensity=\"" +
           format("%.4f", p.intensity) + "\" data-gflops=\"" + format("%.4f", p.gflops) + "\">\n";
    svg += "<circle cx=\"" + n(x) + "\" cy=\"" + n(y) + "\" r=\"4\" fill=\"" + p.color + "\"/>\n";
    const double text_x = b.x0, text_y = b.y1 - 3;
    const double near_x = std::clamp(x, b.x0, b.x1), near_y = std::clamp(y, b.y0, b.y1);
    if (std::hypot(near_x - x, near_y - y) > 12) {
      svg += "<line x1=\"" + n(x) + "\" y1=\"" + n(y) + "\" x2=\"" + n(near_x) + "\" y2=\"" +
             n(near_y) + "\" stroke=\"#999999\" stroke-width=\"0.8\"/>\n";
    }
    svg += "<text x=\"" + n(text_x) + "\" y=\"" + n(text_y) + "\" font-size=\"11\" fill=\"" +
           p.color + "\">" + svg_escape(p.label) + "</text>\n</g>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace kvscope::cli
