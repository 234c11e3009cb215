// Scratch memory kept per thread (scratch_pool.hpp). A decode step made and freed every
// runner's scratch in each call: malloc's own time (5% of an MQA int8 step at 2,000 tokens,
// perf) and first touches of memory out of every cache. Compiled without ISA flags.
#include "kernels/scratch_pool.hpp"

#include <cstdlib>
#include <vector>

namespace kvscope::simd {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kKeep = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kKeep = false;
#else
constexpr bool kKeep = true;
#endif
#else
constexpr bool kKeep = true;
#endif

// A thread keeps at most this much: the scratch of the largest calls (prefill tiles, the
// partial results of long contexts) goes back to malloc.
constexpr std::size_t kMaxBlocks = 32;
constexpr std::size_t kMaxBytes = std::size_t{16} << 20;

// Set when this thread's pool is destroyed (at thread exit, before the destructors of static
// objects, which may still give scratch back): from then on blocks go straight to malloc.
// A plain bool, never destroyed itself.
thread_local bool pool_gone = false;

class Pool {
 public:
  ~Pool() {
    for (const Block& b : blocks_) std::free(b.data);
    pool_gone = true;
  }
  void* take(std::size_t bytes) {
    for (std::size_t i = blocks_.size(); i-- > 0;) {  // the latest first: warmest
      if (blocks_[i].bytes == bytes) {
        void* data = blocks_[i].data;
        blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i));
        held_ -= bytes;
        return data;
      }
    }
    return nullptr;
  }
  std::size_t held() const { return held_; }
  void keep(void* data, std::size_t bytes) {
    blocks_.push_back({data, bytes});
    held_ += bytes;
    while (blocks_.size() > kMaxBlocks || held_ > kMaxBytes) {  // the oldest go first
      std::free(blocks_.front().data);
      held_ -= blocks_.front().bytes;
      blocks_.erase(blocks_.begin());
    }
  }

 private:
  struct Block {
    void* data;
    std::size_t bytes;
  };
  std::vector<Block> blocks_;
  std::size_t held_ = 0;
};

Pool& thread_pool() {
  thread_local Pool pool;
  return pool;
}

}  // namespace

void* take_scratch(std::size_t bytes) {
  if (kKeep && !pool_gone) {
    if (void* kept = thread_pool().take(bytes)) return kept;
  }
  void* data = std::aligned_alloc(64, bytes);
  if (data == nullptr) std::abort();
  return data;
}

void give_back_scratch(void* block, std::size_t bytes) {
  if (block == nullptr) return;
  if (kKeep && !pool_gone && bytes <= kMaxBytes) {
    thread_pool().keep(block, bytes);
  } else {
    std::free(block);
  }
}

bool scratch_pool_keeps() { return kKeep; }

std::size_t scratch_kept_bytes() { return pool_gone ? 0 : thread_pool().held(); }

}  // namespace kvscope::simd
