#pragma once
// `kvscope report --roofline FILE.svg`: where each row's decode step sits under the
// machine's measured roofs.
#include <string>
#include <vector>

#include "engine/measure/report.hpp"

namespace kvscope::cli {

// A log-log roofline: x = arithmetic intensity (FLOPs per byte read per step), y = achieved
// GFLOP/s (FLOPs ÷ median step). The bandwidth roof (the median over rows of the read loop
// measured beside each row) rises to every measured compute roof (the fp32 FMA peak and the
// peak of each dot unit a row ran on); one labelled point per row ("MHA f32 2000": variant,
// cache type, tokens), labels placed so they overlap neither each other nor the points.
// Throws std::invalid_argument when no row has a positive time, bytes and FLOPs.
std::string roofline_svg(const std::vector<ReportRow>& rows);

}  // namespace kvscope::cli
