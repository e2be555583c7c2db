// Memory a hostile file can make the parser allocate: bounded by a small multiple of
// the file's size, whatever counts it claims. This binary counts every allocation.
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"

namespace {
std::atomic<int64_t> g_live_bytes{0};
std::atomic<int64_t> g_peak_bytes{0};

void* CountedAlloc(size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  int64_t live = g_live_bytes.fetch_add(static_cast<int64_t>(malloc_usable_size(p))) +
                 static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak_bytes.load();
  while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live)) {
  }
  return p;
}
void CountedFree(void* p) {
  if (p == nullptr) return;
  g_live_bytes.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)));
  std::free(p);
}
}  // namespace

void* operator new(size_t n) { return CountedAlloc(n); }
void* operator new[](size_t n) { return CountedAlloc(n); }
void operator delete(void* p) noexcept { CountedFree(p); }
void operator delete[](void* p) noexcept { CountedFree(p); }
void operator delete(void* p, size_t) noexcept { CountedFree(p); }
void operator delete[](void* p, size_t) noexcept { CountedFree(p); }

namespace tachyon {
namespace {

using testing_util::ByteBuilder;

constexpr uint32_t kString = 8, kArray = 9, kUint8 = 0;

// Peak bytes allocated while parsing `b`, above what was live before.
int64_t PeakParseBytes(ByteBuilder& b, Status* status) {
  int64_t before = g_live_bytes.load();
  g_peak_bytes.store(before);
  *status = GgufFile::Parse(b.bytes().data(), b.size()).status();
  return g_peak_bytes.load() - before;
}

TEST(GgufMemoryTest, NestedArraysClaimingHugeCountsAllocateLittle) {
  // Eight nested arrays, each claiming as many elements as could fit in what remains,
  // then 1 MB of zero bytes: the parse fails, having allocated a few times the file at most.
  ByteBuilder b;
  b.Header(0, 1).Str("nested").U32(kArray);
  constexpr size_t kPadding = 1 << 20;
  for (int i = 0; i < 7; ++i) b.U32(kArray).U64(kPadding / 12);
  b.U32(kUint8).U64(kPadding + 1);
  for (size_t i = 0; i < kPadding; ++i) b.U8(0);
  Status status;
  int64_t peak = PeakParseBytes(b, &status);
  EXPECT_FALSE(status.ok());
  EXPECT_LT(peak, 4 * static_cast<int64_t>(b.size())) << "peak " << peak << " bytes for a file of " << b.size();
}

TEST(GgufMemoryTest, StringArrayClaimingHugeCountAllocatesLittle) {
  ByteBuilder b;
  b.Header(0, 1).Str("strings").U32(kArray).U32(kString);
  constexpr size_t kPadding = 1 << 20;
  b.U64(kPadding / 8);
  b.U64(kPadding * 2);  // the first string's length runs past the end
  for (size_t i = 0; i < kPadding; ++i) b.U8(0);
  Status status;
  int64_t peak = PeakParseBytes(b, &status);
  EXPECT_FALSE(status.ok());
  EXPECT_LT(peak, 4 * static_cast<int64_t>(b.size())) << "peak " << peak << " bytes for a file of " << b.size();
}

}  // namespace
}  // namespace tachyon
