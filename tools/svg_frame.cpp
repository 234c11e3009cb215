#include "tools/svg_frame.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kvscope::cli {
namespace {

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

}  // namespace

LogAxis::LogAxis(double min, double max) {
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

double LogAxis::fraction(double v) const { return std::log(v / lo) / std::log(hi / lo); }

std::string svg_escape(const std::string& text) {
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

std::string svg_number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v);
  return text;
}

std::string svg_frame(const LogLogMap& m, const std::string& title, const std::string& x_label,
                      const std::string& y_label) {
  const PlotArea& a = m.area;
  const double plot_w = a.plot_width(), plot_h = a.plot_height();
  const auto n = svg_number;
  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + n(a.width) + "\" height=\"" +
         n(a.height) + "\" viewBox=\"0 0 " + n(a.width) + " " + n(a.height) +
         "\" font-family=\"sans-serif\" font-size=\"13\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + n(a.left + plot_w / 2) +
         "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">" +
         svg_escape(title) + "</text>\n";
  svg += "<g class=\"grid\" stroke=\"#dddddd\">\n";
  for (double t : m.x.ticks) {
    svg += "<line x1=\"" + n(m.px(t)) + "\" y1=\"" + n(a.top) + "\" x2=\"" + n(m.px(t)) +
           "\" y2=\"" + n(a.top + plot_h) + "\"/>\n";
  }
  for (double t : m.y.ticks) {
    svg += "<line x1=\"" + n(a.left) + "\" y1=\"" + n(m.py(t)) + "\" x2=\"" + n(a.left + plot_w) +
           "\" y2=\"" + n(m.py(t)) + "\"/>\n";
  }
  svg += "</g>\n<g class=\"axes\" stroke=\"black\">\n";
  svg += "<line x1=\"" + n(a.left) + "\" y1=\"" + n(a.top + plot_h) + "\" x2=\"" +
         n(a.left + plot_w) + "\" y2=\"" + n(a.top + plot_h) + "\"/>\n";
  svg += "<line x1=\"" + n(a.left) + "\" y1=\"" + n(a.top) + "\" x2=\"" + n(a.left) + "\" y2=\"" +
         n(a.top + plot_h) + "\"/>\n</g>\n<g class=\"ticks\">\n";
  for (double t : m.x.ticks) {
    svg += "<text x=\"" + n(m.px(t)) + "\" y=\"" + n(a.top + plot_h + 18) +
           "\" text-anchor=\"middle\">" + tick_label(t) + "</text>\n";
  }
  for (double t : m.y.ticks) {
    svg += "<text x=\"" + n(a.left - 8) + "\" y=\"" + n(m.py(t) + 4) + "\" text-anchor=\"end\">" +
           tick_label(t) + "</text>\n";
  }
  svg += "</g>\n";
  svg += "<text class=\"x-label\" x=\"" + n(a.left + plot_w / 2) + "\" y=\"" + n(a.height - 22) +
         "\" text-anchor=\"middle\">" + svg_escape(x_label) + "</text>\n";
  svg += "<text class=\"y-label\" transform=\"translate(24 " + n(a.top + plot_h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + svg_escape(y_label) + "</text>\n";
  return svg;
}

}  // namespace kvscope::cli
