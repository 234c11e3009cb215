#pragma once
// Cold and warm decode measurements. In a model's decode step, every other layer's cache
// and all the weights stream through between two reads of layer L's cache, so its bytes
// come from DRAM. A cold measurement reproduces that: it reads a model's L caches in order
// and, when they do not already stream past twice the last-level cache, cycles through
// independent copies until they do (or, where memory does not allow copies, flushes the
// lines after each step). Warm re-reads the same L caches step after step.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/kv_cache.hpp"

namespace kvscope {

enum class CacheState { cold, warm };
enum class ColdMethod { automatic, copies, flush };

std::string_view to_string(CacheState state);
std::string_view to_string(ColdMethod method);
// Throw std::invalid_argument naming the value and the choices.
CacheState parse_cache_state(std::string_view name);
ColdMethod parse_cold_method(std::string_view name);

// How many caches a measurement allocates and how it keeps them cold.
struct CachePlan {
  CacheState state = CacheState::cold;
  ColdMethod method = ColdMethod::copies;  // copies or flush (warm: copies, one set)
  std::uint64_t cache_bytes = 0;           // one layer's cache
  std::size_t layers = 1;                  // caches one step reads, in order
  std::size_t caches = 1;                  // distinct caches allocated (≥ layers)
  std::uint64_t llc_bytes = 0;

  std::uint64_t total_bytes() const { return cache_bytes * caches; }
  // Bytes read between two reads of the same cache ((caches − 1) × cache_bytes).
  std::uint64_t bytes_between_reads() const { return cache_bytes * (caches - 1); }
  // "cold (18 caches cycled)", "cold (flushed after each step)", "warm"
  std::string describe() const;
};

// Warm: `layers` caches. Cold by copies: enough caches (at least `layers`) that the bytes
// between two reads of one exceed 2 × llc_bytes: max(layers, ⌈2·llc / cache⌉ + 1). Cold by
// flush: `layers` caches, flushed after each step. Automatic picks copies unless they need
// more than half of `memory_bytes`, then flush. Throws std::invalid_argument for zero sizes.
CachePlan plan_caches(std::uint64_t cache_bytes, std::uint64_t layers, CacheState state,
                      ColdMethod method, std::uint64_t llc_bytes, std::uint64_t memory_bytes);

// Throws std::length_error (require_memory's message, naming the bytes and why) when the
// plan's caches cannot fit in this machine's memory.
void require_plan_memory(const CachePlan& plan, std::string_view what);

// Evicts [data, data + bytes) from every cache level (clflushopt where the CPU has it,
// else clflush), split over `threads` threads, fenced. A no-op off x86.
void flush_from_caches(const void* data, std::size_t bytes, int threads);

// The caches of a plan and the order a measurement reads them in: step s reads caches
// (s·layers + l) mod caches for l = 0…layers−1.
class CacheRotation {
 public:
  // `first` (filled) becomes cache 0; the others are its clones. Checks memory first.
  CacheRotation(const CachePlan& plan, KvCache first);

  // The next cache of the current step; call plan.layers times per step.
  const KvCache& next();
  // Ends a step: with the flush method, evicts the caches just read (call it untimed).
  void end_step(int threads);

  const CachePlan& plan() const { return plan_; }
  std::size_t size() const { return caches_.size(); }
  const KvCache& cache(std::size_t i) const { return caches_.at(i); }
  const std::vector<std::size_t>& read_order() const { return read_order_; }  // every next()
  std::size_t flushes() const { return flushes_; }

 private:
  CachePlan plan_;
  std::vector<KvCache> caches_;
  std::size_t cursor_ = 0;
  std::vector<std::size_t> read_order_;
  std::vector<std::size_t> read_this_step_;
  std::size_t flushes_ = 0;
};

}  // namespace kvscope
