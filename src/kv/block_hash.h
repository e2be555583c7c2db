// BlockHash: the identity of a full KV block's contents, chained so that equal
// hashes mean equal prefixes: hash(parent hash, the block's token ids, extra
// key). The extra key separates caches that must not share blocks (a LoRA
// adapter, a tenant salt); 0 when there is none. 128 bits (XXH3-128): a hit is
// trusted without comparing tokens, so a collision would serve another
// request's KV; at 64 bits a server that caches billions of blocks would meet
// one, at 128 none is expected before 2^64 blocks.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <span>

#include "base/strong_id.h"

namespace tachyon {

struct BlockHash {
  uint64_t low = 0, high = 0;
  auto operator<=>(const BlockHash&) const = default;
};
static_assert(sizeof(BlockHash) == 16);

// The parent of a sequence's first block.
inline constexpr BlockHash kRootBlockHash{0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full};

BlockHash HashBlock(BlockHash parent, std::span<const TokenId> tokens, uint64_t extra_key);

}  // namespace tachyon

template <>
struct std::hash<tachyon::BlockHash> {
  size_t operator()(const tachyon::BlockHash& h) const noexcept { return h.low ^ (h.high * 0x9e3779b97f4a7c15ull); }
};
