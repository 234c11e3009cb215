#pragma once
// CPU features beyond the ISA level: the dot-product and matrix units an attention kernel can
// run on, detected once at run time (CPUID, the OS's XSAVE state, and for AMX the Linux
// permission to use tile data).
#include <string>

namespace kvscope {

struct CpuFeatures {
  bool avx512_vnni = false;  // vpdpbusd on zmm: int8 dot products into int32
  bool avx_vnni = false;     // the same on ymm (VEX encoding)
  bool avx512_bf16 = false;  // vdpbf16ps: bf16 pair dot products into f32
  bool avx512_fp16 = false;  // f16 arithmetic on zmm
  bool amx_bf16 = false;     // AMX tiles with bf16 dot products (CPU and OS state)
  bool amx_int8 = false;     // AMX tiles with int8 dot products (CPU and OS state)
  bool amx_granted = false;  // Linux granted tile data (arch_prctl ARCH_REQ_XCOMP_PERM)
  bool amd = false;          // vendor "AuthenticAMD" (kernels/prefetch_policy.hpp)
  unsigned l1d_kib = 0;      // L1 data cache per core in KiB (prefetch_policy.hpp); 0: unknown
  std::string amx_note;      // why AMX is unusable although the CPU has it; empty otherwise
};

// Detected on first call (and AMX tile data requested from the kernel then); the same object
// afterwards.
const CpuFeatures& cpu_features();

// The CPU's brand string with its family and model, e.g. "AMD EPYC (family 26, model 2)".
std::string cpu_model_name();

// One line for a report header, e.g. "avx512_vnni avx512_bf16 (no amx)".
std::string describe(const CpuFeatures& features);

}  // namespace kvscope
