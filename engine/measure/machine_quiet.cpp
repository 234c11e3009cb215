#include "engine/measure/machine_quiet.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "engine/measure/decode_timing.hpp"

namespace kvscope {
namespace {

double seconds(const timeval& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
}

// The median of positive values, 0 when there is none.
double median_or_zero(const std::vector<double>& values) {
  return values.empty() ? 0.0 : median(values);
}

std::string format(const char* pattern, double a, double b = 0) {
  char text[192];
  std::snprintf(text, sizeof text, pattern, a, b);
  return text;
}

}  // namespace

MachineSample sample_machine() {
  MachineSample s;
  s.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  s.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  std::ifstream("/proc/loadavg") >> s.load_1min;
  std::ifstream stat("/proc/stat");
  std::string line;
  if (std::getline(stat, line) && line.rfind("cpu ", 0) == 0) {
    std::istringstream fields(line.substr(4));
    // user nice system idle iowait irq softirq steal (guest time is inside user already)
    std::uint64_t v[8] = {};
    int read = 0;
    while (read < 8 && fields >> v[read]) ++read;
    if (read >= 4) {
      s.has_cpu_times = true;
      s.busy_ticks = v[0] + v[1] + v[2] + v[5] + v[6];
      s.steal_ticks = v[7];
      for (std::uint64_t t : v) s.total_ticks += t;
    }
  }
  rusage own{};
  if (getrusage(RUSAGE_SELF, &own) == 0)
    s.own_cpu_seconds = seconds(own.ru_utime) + seconds(own.ru_stime);
  return s;
}

MachineObservations observe(const MachineSample& before, const MachineSample& after) {
  MachineObservations o;
  o.load_1min = before.load_1min;
  o.cores = before.cores;
  const double wall = after.wall_seconds - before.wall_seconds;
  if (before.has_cpu_times && after.has_cpu_times && wall > 0) {
    const double tick = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
    const double busy = static_cast<double>(after.busy_ticks - before.busy_ticks) * tick;
    const double own = after.own_cpu_seconds - before.own_cpu_seconds;
    o.others_busy_cores = std::max(0.0, (busy - own) / wall);
    const std::uint64_t total = after.total_ticks - before.total_ticks;
    if (total > 0) {
      o.steal_fraction =
          static_cast<double>(after.steal_ticks - before.steal_ticks) / static_cast<double>(total);
    }
  }
  return o;
}

QuietVerdict judge_quiet(const MachineObservations& seen, const QuietThresholds& limits) {
  std::vector<std::string> reasons;
  const double cores = seen.cores > 0 ? seen.cores : 1;
  const char* core_word = seen.cores == 1 ? "core" : "cores";
  if (seen.load_1min > limits.load_per_core * cores) {
    reasons.push_back(format("load %.1f on %.0f ", seen.load_1min, cores) + core_word);
  }
  if (seen.others_busy_cores > limits.others_busy_per_core * cores) {
    reasons.push_back(format("other programs kept %.1f of %.0f ", seen.others_busy_cores, cores) +
                      core_word + " busy");
  }
  if (seen.steal_fraction > limits.steal_fraction) {
    reasons.push_back(
        format("%.0f%% of CPU time stolen by the hypervisor", 100 * seen.steal_fraction));
  }
  const double spread = median_or_zero(seen.step_spreads);
  if (spread > limits.step_spread) reasons.push_back(format("step times spread %.1f×", spread));
  const double drift = median_or_zero(seen.bandwidth_drifts);
  if (drift > limits.bandwidth_drift) {
    reasons.push_back(format("read bandwidth drifted %.1f× between repetitions", drift));
  }
  const double peak_drift = median_or_zero(seen.peak_drifts);
  if (peak_drift > limits.peak_drift) {
    reasons.push_back(format("FMA peak drifted %.1f× between repetitions", peak_drift));
  }
  // Threads beyond the cores cannot scale: judged against the cores they can have.
  const double parallel = std::min<double>(seen.threads, cores);
  const double scaling = median_or_zero(seen.thread_scalings);
  if (parallel > 1 && !seen.thread_scalings.empty() && scaling < limits.thread_scaling * parallel) {
    reasons.push_back(
        format("%.0f threads reached %.1f× one thread's FMA peak (vCPUs sharing a "
               "physical core, or others running on them)",
               parallel, scaling));
  }
  QuietVerdict verdict;
  verdict.unstable = !reasons.empty();
  for (const std::string& r : reasons) verdict.reason += (verdict.reason.empty() ? "" : "; ") + r;
  return verdict;
}

std::string warning_line(const QuietVerdict& verdict) {
  return verdict.unstable ? "warning: measurements unstable: " + verdict.reason : "";
}

}  // namespace kvscope
