// AmxGemmScratch (kernels/weights/gemm_bf16_amx_blocked.hpp): compiled without ISA flags.
#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/weights/gemm_bf16_amx_blocked.hpp"

namespace kvscope {

struct AmxGemmScratch::Buffer {
  void* data = nullptr;
  std::size_t bytes = 0;

  void reserve(std::size_t want) {
    if (want <= bytes) return;
    void* grown = std::aligned_alloc(64, (want + 63) / 64 * 64);
    if (grown == nullptr) throw std::bad_alloc();
    std::memset(grown, 0, want);  // every page touched now, not inside a timed product
    std::free(data);
    data = grown;
    bytes = want;
  }
  ~Buffer() { std::free(data); }
};

AmxGemmScratch::AmxGemmScratch() : x_(new Buffer) {}

AmxGemmScratch::~AmxGemmScratch() {
  delete x_;
  for (Buffer* b : packed_) delete b;
  for (Buffer* b : tail_) delete b;
}

void AmxGemmScratch::reserve(std::size_t m, const WeightsView& w, int threads) {
  const std::size_t padded = (m + 31) / 32 * 32;
  x_->reserve(padded * w.cols * sizeof(std::uint16_t));
  while (packed_.size() < static_cast<std::size_t>(threads)) {
    packed_.push_back(new Buffer);
    tail_.push_back(new Buffer);
  }
  for (int t = 0; t < threads; ++t) {
    packed_[t]->reserve(kAmxBlockRows * kAmxBlockSteps * 32 * sizeof(std::uint16_t));
    tail_[t]->reserve(32 * w.rows * sizeof(float));
  }
}

std::uint16_t* AmxGemmScratch::x() const { return static_cast<std::uint16_t*>(x_->data); }
std::uint32_t* AmxGemmScratch::packed(int thread) const {
  return static_cast<std::uint32_t*>(packed_[thread]->data);
}
float* AmxGemmScratch::tail(int thread) const { return static_cast<float*>(tail_[thread]->data); }

}  // namespace kvscope
