#include "kernels/weights/row_streams.hpp"

#include <algorithm>

namespace kvscope {

std::size_t RowStreams::streams_at(std::size_t t, std::size_t streams) const {
  const std::size_t left = end - first - t;  // rows from stream 0's row t to the end
  return std::min(streams, (left + length - 1) / length);
}

RowStreams row_streams(std::size_t n, std::size_t threads, std::size_t me, std::size_t streams) {
  const std::size_t share = (n + threads - 1) / threads;
  RowStreams s;
  s.first = std::min(n, me * share);
  s.end = std::min(n, s.first + share);
  s.length = (s.end - s.first + streams - 1) / streams;
  return s;
}

}  // namespace kvscope
