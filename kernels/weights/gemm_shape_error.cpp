#include "kernels/weights/gemm_shape_error.hpp"

#include <stdexcept>
#include <string>

namespace kvscope {

void throw_gemm_shape_error(const char* gemm, const char* needs, std::size_t m, std::size_t rows,
                            std::size_t cols) {
  throw std::invalid_argument(std::string(gemm) + ": needs " + needs + "; got " +
                              std::to_string(m) + " rows of x × W " + std::to_string(rows) + " × " +
                              std::to_string(cols));
}

}  // namespace kvscope
