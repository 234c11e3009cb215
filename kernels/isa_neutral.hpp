#pragma once
// KVSCOPE_ISA_NEUTRAL marks a helper of the kernels that is not a template on the ISA (KvView's
// row addresses, the prefetchers' bookkeeping): its header is compiled into every ISA's unit
// (kernels/arch/), and an out-of-line copy would be one weak symbol that the linker takes from
// any of them — an AVX-512 unit's copy of NextBlock::at (its struct zeroed by vmovdqu8) ran on
// every CPU, a fault on one without AVX-512. Always inlined, each unit keeps its own code.
// tests/isa_units/check_isa_units.cmake fails the build's tests where a unit shares code with
// a unit of another ISA.
#define KVSCOPE_ISA_NEUTRAL [[gnu::always_inline]] inline
