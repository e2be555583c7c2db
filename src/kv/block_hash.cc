#include "kv/block_hash.h"

// The streaming state type is only declared as a complete type in this mode.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

namespace tachyon {

BlockHash HashBlock(BlockHash parent, std::span<const TokenId> tokens, uint64_t extra_key) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, &parent.low, sizeof(parent.low));
  XXH3_128bits_update(&state, &parent.high, sizeof(parent.high));
  XXH3_128bits_update(&state, &extra_key, sizeof(extra_key));
  static_assert(sizeof(TokenId) == sizeof(int32_t), "token ids hash as their int32 values");
  XXH3_128bits_update(&state, tokens.data(), tokens.size() * sizeof(TokenId));
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  return BlockHash{h.low64, h.high64};
}

}  // namespace tachyon
