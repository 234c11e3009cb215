#pragma once
// The AMX GEMMs' shape errors, composed in a unit built without ISA flags: std::string code
// compiled into the AMX units would be weak symbols the linker may hand to every other unit
// (kernels/isa_neutral.hpp).
#include <cstddef>

namespace kvscope {

// Throws std::invalid_argument "<gemm>: needs <needs>; got <m> rows of x × W <rows> × <cols>".
[[noreturn]] void throw_gemm_shape_error(const char* gemm, const char* needs, std::size_t m,
                                         std::size_t rows, std::size_t cols);

}  // namespace kvscope
