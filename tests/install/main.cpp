// A program outside the tree that links the installed kvscope package.
#include <engine/kv_footprint.hpp>

int main() {
  // The lesson's shape: 32 heads × d_head 128 × 2000 tokens, f32, K and V.
  return kvscope::kv_footprint({}).total_bytes == 65'536'000 ? 0 : 1;
}
