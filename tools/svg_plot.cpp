#include "tools/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace kvscope::cli {
namespace {

constexpr double kWidth = 900, kHeight = 540;
constexpr double kLeft = 90, kRight = 260, kTop = 50, kBottom = 70;  // margins
constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v);
  return text;
}

std::string tick_label(double v) {
  char text[32];
  if (v >= 1e6)
    std::snprintf(text, sizeof text, "%gM", v / 1e6);
  else if (v >= 1e3)
    std::snprintf(text, sizeof text, "%gk", v / 1e3);
  else
    std::snprintf(text, sizeof text, "%g", v);
  return text;
}

// A log axis from the data range, padded to the surrounding 1-2-5 ticks.
struct LogAxis {
  double lo, hi;
  std::vector<double> ticks;

  LogAxis(double min, double max) {
    std::vector<double> steps;
    for (int e = static_cast<int>(std::floor(std::log10(min))) - 1;
         e <= static_cast<int>(std::ceil(std::log10(max))) + 1; ++e) {
      for (double m : {1.0, 2.0, 5.0}) steps.push_back(m * std::pow(10.0, e));
    }
    lo = *std::prev(std::upper_bound(steps.begin(), steps.end(), min * (1 + 1e-9)));
    hi = *std::lower_bound(steps.begin(), steps.end(), max * (1 - 1e-9));
    if (hi <= lo) hi = lo * 2;
    for (double s : steps) {
      if (s >= lo * (1 - 1e-9) && s <= hi * (1 + 1e-9)) ticks.push_back(s);
    }
  }
  double fraction(double v) const { return std::log(v / lo) / std::log(hi / lo); }
};

}  // namespace

std::string render_line_chart_svg(const PlotSpec& spec) {
  double x_min = HUGE_VAL, x_max = -HUGE_VAL, y_min = HUGE_VAL, y_max = -HUGE_VAL;
  for (const PlotSeries& s : spec.series) {
    for (auto [x, y] : s.points) {
      if (!(x > 0) || !(y > 0) || !std::isfinite(x) || !std::isfinite(y)) {
        throw std::invalid_argument("plot point of '" + s.name + "' is not positive and finite");
      }
      x_min = std::min(x_min, x), x_max = std::max(x_max, x);
      y_min = std::min(y_min, y), y_max = std::max(y_max, y);
    }
  }
  if (x_min > x_max) throw std::invalid_argument("nothing to plot: no points");
  const LogAxis xa(x_min, x_max), ya(y_min, y_max);
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + xa.fraction(x) * plot_w; };
  auto py = [&](double y) { return kTop + (1 - ya.fraction(y)) * plot_h; };

  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(kWidth) + "\" height=\"" +
         number(kHeight) + "\" viewBox=\"0 0 " + number(kWidth) + " " + number(kHeight) +
         "\" font-family=\"sans-serif\" font-size=\"13\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + number(kLeft + plot_w / 2) +
         "\" y=\"28\" text-anchor=\"middle\" "
         "font-size=\"16\" font-weight=\"bold\">" +
         escape(spec.title) + "</text>\n";
  svg += "<g class=\"grid\" stroke=\"#dddddd\">\n";
  for (double t : xa.ticks) {
    svg += "<line x1=\"" + number(px(t)) + "\" y1=\"" + number(kTop) + "\" x2=\"" + number(px(t)) +
           "\" y2=\"" + number(kTop + plot_h) + "\"/>\n";
  }
  for (double t : ya.ticks) {
    svg += "<line x1=\"" + number(kLeft) + "\" y1=\"" + number(py(t)) + "\" x2=\"" +
           number(kLeft + plot_w) + "\" y2=\"" + number(py(t)) + "\"/>\n";
  }
  svg += "</g>\n<g class=\"axes\" stroke=\"black\">\n";
  svg += "<line x1=\"" + number(kLeft) + "\" y1=\"" + number(kTop + plot_h) + "\" x2=\"" +
         number(kLeft + plot_w) + "\" y2=\"" + number(kTop + plot_h) + "\"/>\n";
  svg += "<line x1=\"" + number(kLeft) + "\" y1=\"" + number(kTop) + "\" x2=\"" + number(kLeft) +
         "\" y2=\"" + number(kTop + plot_h) + "\"/>\n</g>\n<g class=\"ticks\">\n";
  for (double t : xa.ticks) {
    svg += "<text x=\"" + number(px(t)) + "\" y=\"" + number(kTop + plot_h + 18) +
           "\" text-anchor=\"middle\">" + tick_label(t) + "</text>\n";
  }
  for (double t : ya.ticks) {
    svg += "<text x=\"" + number(kLeft - 8) + "\" y=\"" + number(py(t) + 4) +
           "\" text-anchor=\"end\">" + tick_label(t) + "</text>\n";
  }
  svg += "</g>\n";
  svg += "<text class=\"x-label\" x=\"" + number(kLeft + plot_w / 2) + "\" y=\"" +
         number(kHeight - 22) + "\" text-anchor=\"middle\">" + escape(spec.x_label) + "</text>\n";
  svg += "<text class=\"y-label\" transform=\"translate(24 " + number(kTop + plot_h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + escape(spec.y_label) + "</text>\n";

  for (std::size_t i = 0; i < spec.series.size(); ++i) {
    const PlotSeries& s = spec.series[i];
    const std::string color =
        kColors[static_cast<std::size_t>(s.color >= 0 ? s.color : static_cast<int>(i)) %
                std::size(kColors)];
    const std::string dash = s.dash.empty() ? "" : " stroke-dasharray=\"" + s.dash + "\"";
    std::vector<std::pair<double, double>> points = s.points;
    std::sort(points.begin(), points.end());
    svg += "<g class=\"series\" data-name=\"" + escape(s.name) +
           "\">\n<polyline fill=\"none\" "
           "stroke=\"" +
           color + "\" stroke-width=\"2\"" + dash + " points=\"";
    for (auto [x, y] : points) svg += number(px(x)) + "," + number(py(y)) + " ";
    svg += "\"/>\n";
    for (auto [x, y] : points) {
      svg += "<circle cx=\"" + number(px(x)) + "\" cy=\"" + number(py(y)) + "\" r=\"3.5\" fill=\"" +
             color + "\"/>\n";
    }
    svg += "</g>\n";
    const double ly = kTop + 10 + 22.0 * static_cast<double>(i);
    const double lx = kLeft + plot_w + 20;
    svg += "<g class=\"legend\"><line x1=\"" + number(lx) + "\" y1=\"" + number(ly) + "\" x2=\"" +
           number(lx + 24) + "\" y2=\"" + number(ly) + "\" stroke=\"" + color +
           "\" stroke-width=\"2\"" + dash + "/><text x=\"" + number(lx + 30) + "\" y=\"" +
           number(ly + 4) + "\">" + escape(s.name) + "</text></g>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace kvscope::cli
