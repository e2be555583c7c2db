// The AVX-512 element-wise ops give the AVX2 ones' results bit for bit (and so are
// within ops_avx2_test.cc's tolerances of the scalar reference), at every length
// around the 16-lane and 8-value steps, writing nothing past the row. Run twice:
// natively where the CPU has AVX-512, and built on SIMDe's portable AVX-512
// (ops_avx512_emulated.cc) on any CPU with AVX2, where libsimde-dev was found.
#include "kernels/x86/ops_avx512.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/kernels_test_util.h"
#include "kernels/ref/ops.h"
#include "kernels/x86/ops_avx2.h"

namespace tachyon {
namespace {

using testing_util::RandomNonZero;

struct Avx512Ops {
  std::string name;
  void (*rms_norm)(const float*, const float*, int64_t, float, float*);
  void (*gelu_tanh_mul)(const float*, const float*, int64_t, float*);
  void (*soft_cap)(float*, int64_t, float);
};

// The implementations this build and CPU can run.
std::vector<Avx512Ops> Implementations() {
  std::vector<Avx512Ops> ops;
  if (CpuHasAvx512()) ops.push_back({"native", avx512::RmsNorm, avx512::GeluTanhMul, avx512::SoftCap});
#ifdef TACHYON_HAVE_SIMDE
  ops.push_back({"emulated", avx512_emulated::RmsNorm, avx512_emulated::GeluTanhMul, avx512_emulated::SoftCap});
#endif
  return ops;
}

constexpr int64_t kLengths[] = {1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 40, 64, 100, 128, 256, 2048, 2051};
constexpr float kGuard = 12345.0f;  // what the slots past a row hold before and after

void ExpectBitEqual(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    ASSERT_EQ(a, b) << what << " at " << i << ": " << got[i] << " against AVX2's " << want[i];
  }
}

class OpsAvx512Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CpuHasAvx2()) GTEST_SKIP() << "this CPU has no AVX2 to compare the AVX-512 ops with";
    implementations_ = Implementations();
    if (implementations_.empty()) {
      GTEST_SKIP() << "this CPU has no AVX-512 and the build found no SIMDe (libsimde-dev) to emulate it";
    }
  }
  std::vector<Avx512Ops> implementations_;
};

// Sums of squares in AVX2's order (its even and odd chunks of 8), then the same
// products: the per-head Q/K norms (head_dim 64, 128, 256) and whole rows.
TEST_F(OpsAvx512Test, RmsNormGivesTheAvx2Results) {
  for (const Avx512Ops& ops : implementations_) {
    for (int64_t n : kLengths) {
      const std::vector<float> x = RandomNonZero(n, 1, 3.0f), w = RandomNonZero(n, 2);
      std::vector<float> got(n + 16, kGuard), want(n);
      ops.rms_norm(x.data(), w.data(), n, 1e-6f, got.data());
      avx2::RmsNorm(x.data(), w.data(), n, 1e-6f, want.data());
      for (int64_t i = n; i < n + 16; ++i) ASSERT_EQ(got[i], kGuard) << ops.name << ", n " << n << ": wrote past the row";
      got.resize(n);
      ExpectBitEqual(got, want, ops.name + " RmsNorm, n " + std::to_string(n));
      // In place, as Model::Forward normalizes the heads.
      std::vector<float> in_place = x;
      ops.rms_norm(in_place.data(), w.data(), n, 1e-6f, in_place.data());
      ExpectBitEqual(in_place, want, ops.name + " RmsNorm in place, n " + std::to_string(n));
    }
  }
}

// The F16 table, its thresholds at +-10 and the rounding's ties, as AVX2 and the
// reference compute them.
TEST_F(OpsAvx512Test, GeluTanhMulGivesTheAvx2AndReferenceResults) {
  for (const Avx512Ops& ops : implementations_) {
    for (int64_t n : kLengths) {
      std::vector<float> g = RandomNonZero(n, 7, 4.0f), u = RandomNonZero(n, 8);
      const float special[] = {-10.0f, 10.0f, -30.0f, 30.0f, 1.0f + 1.0f / 2048, -9.999f, 0.0f, -0.0f};
      for (int64_t i = 0; i < n && i < 8; ++i) g[n - 1 - i] = special[i];  // in the masked tail too
      std::vector<float> got(n + 16, kGuard), want(n), reference(n);
      ops.gelu_tanh_mul(g.data(), u.data(), n, got.data());
      avx2::GeluTanhMul(g.data(), u.data(), n, want.data());
      ref::GeluTanhMul(g.data(), u.data(), n, reference.data());
      for (int64_t i = n; i < n + 16; ++i) ASSERT_EQ(got[i], kGuard) << ops.name << ", n " << n << ": wrote past the row";
      got.resize(n);
      ExpectBitEqual(got, want, ops.name + " GeluTanhMul, n " + std::to_string(n));
      ExpectBitEqual(got, reference, ops.name + " GeluTanhMul against the reference, n " + std::to_string(n));
    }
  }
}

// The polynomial tanh and exp lane by lane as AVX2's: logits far past the cap,
// around the series' switch at |x / cap| = 0.55, and the saturation at 9.5.
TEST_F(OpsAvx512Test, SoftCapGivesTheAvx2Results) {
  for (const Avx512Ops& ops : implementations_) {
    for (int64_t n : kLengths) {
      std::vector<float> x = RandomNonZero(n, 11, 60.0f);
      const float special[] = {0.55f * 30.0f, -0.55f * 30.0f, 9.5f * 30.0f, 1e6f, -1e6f, 0.0f, 1e-30f, 30.0f};
      for (int64_t i = 0; i < n && i < 8; ++i) x[n - 1 - i] = special[i];
      std::vector<float> got(n + 16, kGuard), want = x;
      std::copy(x.begin(), x.end(), got.begin());
      ops.soft_cap(got.data(), n, 30.0f);
      avx2::SoftCap(want.data(), n, 30.0f);
      for (int64_t i = n; i < n + 16; ++i) ASSERT_EQ(got[i], kGuard) << ops.name << ", n " << n << ": wrote past the row";
      got.resize(n);
      ExpectBitEqual(got, want, ops.name + " SoftCap, n " + std::to_string(n));
    }
  }
}

}  // namespace
}  // namespace tachyon
