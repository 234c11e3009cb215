#pragma once
// How report rows are shown: a text table with a plain-language answer, JSON, CSV, SVG.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/measure/report.hpp"

namespace kvscope::cli {

nlohmann::json report_json(const std::vector<ReportRow>& rows);
std::string report_csv(const std::vector<ReportRow>& rows);
std::string report_table(const std::vector<ReportRow>& rows);

// What one decode step recomputes, what it only re-reads, and where the time goes, for the
// first context length in `rows` (MHA f32 row if present, else the first row).
std::string explain_report(const std::vector<ReportRow>& rows);

// Decode tokens/s against context length, one line per variant × cache type.
std::string report_svg(const std::vector<ReportRow>& rows);

}  // namespace kvscope::cli
