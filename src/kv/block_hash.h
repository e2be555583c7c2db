// BlockHash: the identity of a full KV block's contents, chained so that equal
// hashes mean equal prefixes: hash(parent hash, the block's token ids, extra
// key). The extra key separates caches that must not share blocks (a LoRA
// adapter, a tenant salt); 0 when there is none.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <span>

#include "base/strong_id.h"

namespace tachyon {

struct BlockHash {
  uint64_t value = 0;
  auto operator<=>(const BlockHash&) const = default;
};

// The parent of a sequence's first block.
inline constexpr BlockHash kRootBlockHash{0x9e3779b97f4a7c15ull};

BlockHash HashBlock(BlockHash parent, std::span<const TokenId> tokens, uint64_t extra_key);

}  // namespace tachyon

template <>
struct std::hash<tachyon::BlockHash> {
  size_t operator()(const tachyon::BlockHash& h) const noexcept { return h.value; }
};
