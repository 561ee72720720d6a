#include <memory>

#include "harness.hpp"
#include "kvbridge/buffer.hpp"

TEST_CASE(buffers_are_counted_once_each) {
  const auto before = kvbridge::live_buffers();
  {
    auto a = std::make_unique<kvbridge::Buffer<int>>(16);
    kvbridge::Buffer<float> b(0);
    CHECK(kvbridge::live_buffers() == before + 2);
    CHECK(a->size() == 16 && a->data()[15] == 0);  // zero-initialised
  }
  CHECK(kvbridge::live_buffers() == before);
}

HARNESS_MAIN()
