#include "engine/dnnl_matmul.hpp"

#include <omp.h>

#include <dnnl.hpp>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

namespace kvscope {

struct DnnlMatmul::Impl {
  using Key = std::tuple<std::size_t, std::size_t, std::size_t, std::size_t, bool>;  // m k n ldy bf16
  struct Entry {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul primitive;
  };

  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Key, Entry> primitives;

  Entry& get(std::size_t m, std::size_t k, std::size_t n, std::size_t ldy, bool bf16) {
    const Key key{m, k, n, ldy, bf16};
    auto it = primitives.find(key);
    if (it != primitives.end()) return it->second;
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const auto dim = [](std::size_t v) { return static_cast<dnnl::memory::dim>(v); };
    const dt in_type = bf16 ? dt::bf16 : dt::f32;
    const dnnl::memory::desc src({dim(m), dim(k)}, in_type, tag::ab);
    const dnnl::memory::desc weights({dim(k), dim(n)}, in_type, tag::ba);  // W[n × k] row-major
    const dnnl::memory::desc dst({dim(m), dim(n)}, dt::f32, {dim(ldy), 1});
    try {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, dst), engine);
      dnnl::matmul primitive(pd);
      return primitives.emplace(key, Entry{std::move(pd), std::move(primitive)}).first->second;
    } catch (const dnnl::error& e) {
      throw std::runtime_error("oneDNN " + std::string(bf16 ? "bf16" : "f32") + " matmul " +
                               std::to_string(m) + "×" + std::to_string(k) + " · " +
                               std::to_string(k) + "×" + std::to_string(n) +
                               " unavailable: " + e.what());
    }
  }

  void run(Entry& e, const void* x, const void* w, float* y, int threads) {
    // oneDNN's memory objects wrap our buffers without copying; inputs are only read.
    dnnl::memory src(e.pd.src_desc(), engine, const_cast<void*>(x));
    dnnl::memory weights(e.pd.weights_desc(), engine, const_cast<void*>(w));
    dnnl::memory dst(e.pd.dst_desc(), engine, y);
    // Restores the caller's thread count even if oneDNN throws.
    struct ThreadCount {
      int previous = omp_get_max_threads();
      explicit ThreadCount(int threads) { omp_set_num_threads(threads); }
      ~ThreadCount() { omp_set_num_threads(previous); }
    } thread_count(threads);
    e.primitive.execute(stream,
                        {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
    stream.wait();
  }
};

DnnlMatmul::DnnlMatmul() : impl_(std::make_unique<Impl>()) {}
DnnlMatmul::~DnnlMatmul() = default;
DnnlMatmul::DnnlMatmul(DnnlMatmul&&) noexcept = default;
DnnlMatmul& DnnlMatmul::operator=(DnnlMatmul&&) noexcept = default;

void DnnlMatmul::multiply(const float* x, const float* w, std::size_t m, std::size_t k,
                          std::size_t n, float* y, int threads, std::size_t ldy) {
  impl_->run(impl_->get(m, k, n, ldy ? ldy : n, false), x, w, y, threads);
}

void DnnlMatmul::multiply_bf16(const std::uint16_t* x, const std::uint16_t* w, std::size_t m,
                               std::size_t k, std::size_t n, float* y, int threads) {
  impl_->run(impl_->get(m, k, n, n, true), x, w, y, threads);
}

bool DnnlMatmul::has_bf16() {
  static const bool available = [] {
    try {
      DnnlMatmul probe;
      probe.impl_->get(16, 64, 64, 64, true);
      return true;
    } catch (const std::runtime_error&) {
      return false;
    }
  }();
  return available;
}

std::size_t DnnlMatmul::cached_primitives() const { return impl_->primitives.size(); }

std::string DnnlMatmul::implementation(std::size_t m, std::size_t k, std::size_t n, bool bf16) {
  return impl_->get(m, k, n, n, bf16).pd.impl_info_str();
}

}  // namespace kvscope
