#pragma once
// A small SVG line chart with logarithmic axes, for `kvscope report --svg`.
#include <string>
#include <utility>
#include <vector>

namespace kvscope::cli {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), both > 0
  int color = -1;                                 // palette index; -1: the series' own index
  std::string dash;                               // SVG stroke-dasharray, e.g. "6 3"; empty: solid
  // A limit drawn as a thin line in the series' colour, no markers (the report: each row's
  // speed of light); empty: none.
  std::vector<std::pair<double, double>> limit;
};

struct PlotSpec {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<PlotSeries> series;
  std::string limit_legend;  // the legend's line for the thin limit lines, if any are drawn
};

// A standalone SVG document: log-scaled x and y axes with ticks at 1-2-5 steps, one
// polyline with point markers per series (and its thin limit line), and a legend. Throws
// std::invalid_argument when there is no point or a coordinate is not positive and finite.
std::string render_line_chart_svg(const PlotSpec& spec);

}  // namespace kvscope::cli
