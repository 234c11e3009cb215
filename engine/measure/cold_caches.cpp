#include "engine/measure/cold_caches.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "engine/checked_math.hpp"
#include "engine/memory.hpp"
#include "kernels/units/cpu_features.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace kvscope {
namespace {

#if defined(__x86_64__)
bool cpu_has_clflushopt() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (b >> 23) & 1;
}

__attribute__((target("clflushopt"))) void flush_lines_opt(const std::byte* p, std::size_t n) {
  for (std::size_t i = 0; i < n; i += kCacheLineBytes)
    _mm_clflushopt(const_cast<std::byte*>(p + i));
}

void flush_lines(const std::byte* p, std::size_t n) {
  for (std::size_t i = 0; i < n; i += kCacheLineBytes) _mm_clflush(p + i);
}
#endif

}  // namespace

std::string_view to_string(CacheState state) { return state == CacheState::cold ? "cold" : "warm"; }

std::string_view to_string(ColdMethod method) {
  switch (method) {
    case ColdMethod::automatic:
      return "auto";
    case ColdMethod::copies:
      return "copies";
    case ColdMethod::flush:
      return "flush";
  }
  return "?";
}

CacheState parse_cache_state(std::string_view name) {
  if (name == "cold") return CacheState::cold;
  if (name == "warm") return CacheState::warm;
  throw std::invalid_argument("cache state '" + std::string(name) + "': expected cold or warm");
}

ColdMethod parse_cold_method(std::string_view name) {
  if (name == "auto") return ColdMethod::automatic;
  if (name == "copies") return ColdMethod::copies;
  if (name == "flush") return ColdMethod::flush;
  throw std::invalid_argument("cold method '" + std::string(name) +
                              "': expected auto, copies or flush");
}

std::string CachePlan::describe() const {
  if (state == CacheState::warm) return "warm";
  if (method == ColdMethod::flush) return "cold (flushed after each step)";
  return "cold (" + std::to_string(caches) + " caches cycled)";
}

CachePlan plan_caches(std::uint64_t cache_bytes, std::uint64_t layers, CacheState state,
                      ColdMethod method, std::uint64_t llc_bytes, std::uint64_t memory_bytes,
                      int llcs) {
  if (cache_bytes == 0) throw std::invalid_argument("cache bytes must be at least 1, got 0");
  if (layers == 0) throw std::invalid_argument("layers must be at least 1, got 0");
  if (llcs < 1) {
    throw std::invalid_argument("last-level caches must be at least 1, got " +
                                std::to_string(llcs));
  }
  CachePlan plan{.state = state,
                 .method = ColdMethod::copies,
                 .cache_bytes = cache_bytes,
                 .layers = layers,
                 .caches = layers,
                 .llc_bytes = llc_bytes,
                 .llcs = llcs};
  if (state == CacheState::warm) return plan;
  // (caches − 1) · cache_bytes > kColdSpanPerLlc · llc_bytes · llcs.
  const std::uint64_t span =
      checked_mul(checked_mul(llc_bytes, kColdSpanPerLlc, "cold cache bytes"),
                  static_cast<std::uint64_t>(llcs), "cold cache bytes");
  const std::uint64_t needed = span / cache_bytes + 2;
  const std::uint64_t copies = std::max<std::uint64_t>(layers, needed);
  const bool copies_fit = copies <= memory_bytes / 2 / cache_bytes;
  if (method == ColdMethod::flush || (method == ColdMethod::automatic && !copies_fit)) {
    plan.method = ColdMethod::flush;
    return plan;
  }
  plan.caches = copies;
  (void)checked_mul(copies, cache_bytes, "cold cache bytes");
  return plan;
}

void require_plan_memory(const CachePlan& plan, std::string_view what) {
  const std::uint64_t total = checked_mul(plan.cache_bytes, plan.caches, "cache bytes");
  std::string why = std::string(what) + " (" + std::to_string(plan.caches) + " cache" +
                    (plan.caches == 1 ? "" : "s") + " of " + with_commas(plan.cache_bytes) +
                    " bytes";
  if (plan.state == CacheState::cold && plan.method == ColdMethod::copies) {
    why += ", to stream more than " + std::to_string(kColdSpanPerLlc * plan.llcs) + " × the " +
           with_commas(plan.llc_bytes) + "-byte last-level cache between two reads of one";
  }
  require_memory(total, why + ")");
}

void require_pair_memory(const CachePlan& a, const CachePlan& b, std::string_view what) {
  require_plans_memory({a, b}, what);
}

void require_plans_memory(const std::vector<CachePlan>& plans, std::string_view what) {
  // "(6 caches of 4,096 bytes, 2 of 512 bytes and 3 of 1,024 bytes)"
  std::uint64_t total = 0;
  std::string parts;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const CachePlan& plan = plans[i];
    total = checked_add(total, checked_mul(plan.cache_bytes, plan.caches, "cache bytes"),
                        "cache bytes");
    parts += std::string(i == 0                  ? ""
                         : i + 1 == plans.size() ? " and "
                                                 : ", ") +
             std::to_string(plan.caches) + (i == 0 ? " caches" : "") + " of " +
             with_commas(plan.cache_bytes) + " bytes";
  }
  require_memory(total, std::string(what) + " (" + parts + ")");
}

void flush_from_caches(const void* data, std::size_t bytes, int threads) {
#if defined(__x86_64__)
  static const bool opt = cpu_has_clflushopt();
  const auto* p = static_cast<const std::byte*>(data);
  const std::size_t lines = (bytes + kCacheLineBytes - 1) / kCacheLineBytes;
  const int n = std::max(1, threads);
#pragma omp parallel for num_threads(n)
  for (int t = 0; t < n; ++t) {
    const std::size_t begin = lines * t / n * kCacheLineBytes;
    const std::size_t end = std::min(bytes, lines * (t + 1) / n * kCacheLineBytes);
    if (end <= begin) continue;
    if (opt) {
      flush_lines_opt(p + begin, end - begin);
    } else {
      flush_lines(p + begin, end - begin);
    }
  }
  _mm_mfence();
#else
  (void)data, (void)bytes, (void)threads;
#endif
}

int last_level_caches_reached(int threads) { return cpu_features().amd ? std::max(1, threads) : 1; }

CacheRotation::CacheRotation(const CachePlan& plan, KvCache first) : plan_(plan) {
  require_plan_memory(plan, "this measurement");
  caches_.reserve(plan.caches);
  caches_.push_back(std::move(first));
  while (caches_.size() < plan.caches) caches_.push_back(caches_.front().clone());
}

const KvCache& CacheRotation::next() {
  const std::size_t i = cursor_;
  cursor_ = (cursor_ + 1) % caches_.size();
  read_order_.push_back(i);
  read_this_step_.push_back(i);
  return caches_[i];
}

void CacheRotation::end_step(int threads) {
  if (plan_.state == CacheState::cold && plan_.method == ColdMethod::flush) {
    for (std::size_t i : read_this_step_) {
      for (const auto& [data, bytes] : caches_[i].memory_regions()) {
        flush_from_caches(data, bytes, threads);
      }
    }
    ++flushes_;
  }
  read_this_step_.clear();
}

}  // namespace kvscope
