#include "tools/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>

#include "tools/svg_frame.hpp"

namespace kvscope::cli {
namespace {

constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string polyline(const LogLogMap& m, std::vector<std::pair<double, double>> points,
                     const std::string& style) {
  std::sort(points.begin(), points.end());
  std::string svg = "<polyline fill=\"none\" " + style + " points=\"";
  for (auto [x, y] : points) svg += svg_number(m.px(x)) + "," + svg_number(m.py(y)) + " ";
  return svg + "\"/>\n";
}

}  // namespace

std::string render_line_chart_svg(const PlotSpec& spec) {
  double x_min = HUGE_VAL, x_max = -HUGE_VAL, y_min = HUGE_VAL, y_max = -HUGE_VAL;
  for (const PlotSeries& s : spec.series) {
    for (const auto& points : {s.points, s.limit}) {
      for (auto [x, y] : points) {
        if (!(x > 0) || !(y > 0) || !std::isfinite(x) || !std::isfinite(y)) {
          throw std::invalid_argument("plot point of '" + s.name + "' is not positive and finite");
        }
        x_min = std::min(x_min, x), x_max = std::max(x_max, x);
        y_min = std::min(y_min, y), y_max = std::max(y_max, y);
      }
    }
  }
  if (x_min > x_max) throw std::invalid_argument("nothing to plot: no points");
  const LogLogMap m{PlotArea{}, LogAxis(x_min, x_max), LogAxis(y_min, y_max)};
  const auto n = svg_number;
  std::string svg = svg_frame(m, spec.title, spec.x_label, spec.y_label);

  const double lx = m.area.left + m.area.plot_width() + 20;
  bool any_limit = false;
  for (std::size_t i = 0; i < spec.series.size(); ++i) {
    const PlotSeries& s = spec.series[i];
    const std::string color =
        kColors[static_cast<std::size_t>(s.color >= 0 ? s.color : static_cast<int>(i)) %
                std::size(kColors)];
    const std::string dash = s.dash.empty() ? "" : " stroke-dasharray=\"" + s.dash + "\"";
    svg += "<g class=\"series\" data-name=\"" + svg_escape(s.name) + "\">\n";
    svg += polyline(m, s.points, "stroke=\"" + color + "\" stroke-width=\"2\"" + dash);
    for (auto [x, y] : s.points) {
      svg += "<circle cx=\"" + n(m.px(x)) + "\" cy=\"" + n(m.py(y)) + "\" r=\"3.5\" fill=\"" +
             color + "\"/>\n";
    }
    if (!s.limit.empty()) {
      any_limit = true;
      svg +=
          "<g class=\"limit\">" +
          polyline(m, s.limit,
                   "stroke=\"" + color + "\" stroke-width=\"1\" stroke-opacity=\"0.55\"" + dash) +
          "</g>\n";
    }
    svg += "</g>\n";
    const double ly = m.area.top + 10 + 22.0 * static_cast<double>(i);
    svg += "<g class=\"legend\"><line x1=\"" + n(lx) + "\" y1=\"" + n(ly) + "\" x2=\"" +
           n(lx + 24) + "\" y2=\"" + n(ly) + "\" stroke=\"" + color + "\" stroke-width=\"2\"" +
           dash + "/><text x=\"" + n(lx + 30) + "\" y=\"" + n(ly + 4) + "\">" + svg_escape(s.name) +
           "</text></g>\n";
  }
  if (any_limit && !spec.limit_legend.empty()) {
    const double ly = m.area.top + 10 + 22.0 * static_cast<double>(spec.series.size()) + 8;
    svg += "<g class=\"legend\"><line x1=\"" + n(lx) + "\" y1=\"" + n(ly) + "\" x2=\"" +
           n(lx + 24) + "\" y2=\"" + n(ly) +
           "\" stroke=\"#555555\" stroke-width=\"1\" stroke-opacity=\"0.55\"/><text x=\"" +
           n(lx + 30) + "\" y=\"" + n(ly + 4) + "\">" + svg_escape(spec.limit_legend) +
           "</text></g>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace kvscope::cli
