#pragma once
// The parts the kvscope SVG charts share: log axes padded to 1-2-5 ticks, a frame with
// title, grid, axes, tick labels and axis labels, and text escaping.
#include <string>
#include <vector>

namespace kvscope::cli {

// A log axis from a data range, padded to the surrounding 1-2-5 ticks.
struct LogAxis {
  double lo, hi;
  std::vector<double> ticks;

  LogAxis(double min, double max);
  // Where v lies between lo (0) and hi (1), on a log scale.
  double fraction(double v) const;
};

// The plot area inside the picture, in SVG units.
struct PlotArea {
  double width = 900, height = 540;                      // the whole picture
  double left = 90, right = 260, top = 50, bottom = 70;  // margins
  double plot_width() const { return width - left - right; }
  double plot_height() const { return height - top - bottom; }
};

// Maps data to picture coordinates.
struct LogLogMap {
  PlotArea area;
  LogAxis x, y;
  double px(double v) const { return area.left + x.fraction(v) * area.plot_width(); }
  double py(double v) const { return area.top + (1 - y.fraction(v)) * area.plot_height(); }
};

std::string svg_escape(const std::string& text);
std::string svg_number(double v);  // one decimal

// The XML header, the <svg> element, a white background, the title, the grid, the axes with
// tick labels and the axis labels; the caller appends its marks and "</svg>\n".
std::string svg_frame(const LogLogMap& map, const std::string& title, const std::string& x_label,
                      const std::string& y_label);

}  // namespace kvscope::cli
