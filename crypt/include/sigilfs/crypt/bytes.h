// Byte-span aliases shared by every layer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace sigilfs {

using ByteSpan = std::span<const uint8_t>;
using MutableByteSpan = std::span<uint8_t>;

inline ByteSpan AsBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace sigilfs
