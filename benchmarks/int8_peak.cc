// The int8 multiply-add peak of this CPU with N threads, from register-only
// loops (no memory traffic), and the clock they run at: the bound prefill's
// int8 matrix products are measured against (issue 41, goal 2).
//   build/release/benchmarks/int8_peak [threads=2]
// Prints, per instruction the kernels multiply with, the best of 5 passes:
//   clock      GHz: a chain of dependent scalar adds (one a cycle) on every thread at once;
//   vpdpbusd   AVX-512 VNNI, 64 multiply-adds a zmm instruction (where the CPU has it);
//   vpmaddubsw AVX2, 32 multiply-adds a ymm instruction (u8 x s8 pairs summed to s16),
//              alone and with the vpaddw that accumulates it (the AVX2 kernels' inner pair
//              for unsigned quants);
//   signed     AVX2's shortest sequence for 32 signed x signed int8 products (Q8_0 weights
//              times Q8_0 activations): vpsignb, vpmaddubsw, vpmaddwd (pairs to int32,
//              as int16 cannot hold two of them), vpaddd; the bound of the Q8_0 kernels
//              on a CPU without VNNI;
//   int16 pairs the alternative without vpsignb: even and odd bytes widened to int16
//              (not counted), two vpmaddwd and two vpaddd a 32 products;
// each as G multiply-adds/s for all threads together and instructions a cycle a thread.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

namespace {

constexpr int64_t kIterations = 20'000'000;

// Runs body(iterations) on `threads` threads at once; returns the best of 5
// passes' wall seconds.
double BestSeconds(int threads, const std::function<void(int64_t)>& body) {
  double best = 1e30;
  for (int pass = 0; pass < 5; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) workers.emplace_back([&] { body(kIterations); });
    for (std::thread& w : workers) w.join();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// 16 dependent adds an iteration: one a cycle.
void AddChain(int64_t iterations) {
  uint64_t x = 1;
  for (int64_t i = 0; i < iterations; ++i) {
    asm volatile(
        "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\t"
        "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\t"
        "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\t"
        "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0"
        : "+r"(x));
  }
}

// 10 independent vpmaddubsw an iteration.
__attribute__((target("avx2"))) void Maddubs(int64_t iterations) {
  __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(5);
  for (int64_t i = 0; i < iterations; ++i) {
    __m256i t0, t1, t2, t3, t4, t5, t6, t7, t8, t9;
    asm volatile(
        "vpmaddubsw %10, %11, %0\n\tvpmaddubsw %10, %11, %1\n\tvpmaddubsw %10, %11, %2\n\t"
        "vpmaddubsw %10, %11, %3\n\tvpmaddubsw %10, %11, %4\n\tvpmaddubsw %10, %11, %5\n\t"
        "vpmaddubsw %10, %11, %6\n\tvpmaddubsw %10, %11, %7\n\tvpmaddubsw %10, %11, %8\n\t"
        "vpmaddubsw %10, %11, %9"
        : "=&x"(t0), "=&x"(t1), "=&x"(t2), "=&x"(t3), "=&x"(t4), "=&x"(t5), "=&x"(t6), "=&x"(t7), "=&x"(t8),
          "=&x"(t9)
        : "x"(a), "x"(b));
  }
}

// 5 vpmaddubsw an iteration, each added into its own 16-bit accumulator.
__attribute__((target("avx2"))) void MaddubsAdd(int64_t iterations) {
  __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(5);
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0, s4 = s0;
  for (int64_t i = 0; i < iterations; ++i) {
    __m256i t0, t1, t2, t3, t4;
    asm volatile(
        "vpmaddubsw %10, %11, %5\n\tvpaddw %5, %0, %0\n\t"
        "vpmaddubsw %10, %11, %6\n\tvpaddw %6, %1, %1\n\t"
        "vpmaddubsw %10, %11, %7\n\tvpaddw %7, %2, %2\n\t"
        "vpmaddubsw %10, %11, %8\n\tvpaddw %8, %3, %3\n\t"
        "vpmaddubsw %10, %11, %9\n\tvpaddw %9, %4, %4"
        : "+x"(s0), "+x"(s1), "+x"(s2), "+x"(s3), "+x"(s4), "=&x"(t0), "=&x"(t1), "=&x"(t2), "=&x"(t3), "=&x"(t4)
        : "x"(a), "x"(b));
  }
}

// 6 chains of vpsignb + vpmaddubsw + vpmaddwd + vpaddd an iteration into 6
// accumulators, each chain through a temporary of its own (15 registers with the
// activations, the weights and the ones: none spilled, nothing carried from one
// iteration to the next but the sums).
__attribute__((target("avx2"))) void SignedSequence(int64_t iterations) {
  __m256i w = _mm256_set1_epi8(3), x = _mm256_set1_epi8(-5), ones = _mm256_set1_epi16(1);
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0;
  for (int64_t i = 0; i < iterations; ++i) {
    __m256i t0, t1, t2, t3, t4, t5;
    asm volatile(
        "vpsignb %12, %13, %6\n\tvpmaddubsw %6, %12, %6\n\tvpmaddwd %14, %6, %6\n\tvpaddd %6, %0, %0\n\t"
        "vpsignb %12, %13, %7\n\tvpmaddubsw %7, %12, %7\n\tvpmaddwd %14, %7, %7\n\tvpaddd %7, %1, %1\n\t"
        "vpsignb %12, %13, %8\n\tvpmaddubsw %8, %12, %8\n\tvpmaddwd %14, %8, %8\n\tvpaddd %8, %2, %2\n\t"
        "vpsignb %12, %13, %9\n\tvpmaddubsw %9, %12, %9\n\tvpmaddwd %14, %9, %9\n\tvpaddd %9, %3, %3\n\t"
        "vpsignb %12, %13, %10\n\tvpmaddubsw %10, %12, %10\n\tvpmaddwd %14, %10, %10\n\tvpaddd %10, %4, %4\n\t"
        "vpsignb %12, %13, %11\n\tvpmaddubsw %11, %12, %11\n\tvpmaddwd %14, %11, %11\n\tvpaddd %11, %5, %5"
        : "+x"(s0), "+x"(s1), "+x"(s2), "+x"(s3), "+x"(s4), "+x"(s5), "=&x"(t0), "=&x"(t1), "=&x"(t2), "=&x"(t3),
          "=&x"(t4), "=&x"(t5)
        : "x"(w), "x"(x), "x"(ones));
  }
}

// The int16 alternative to the signed sequence: the weights' and activations'
// even and odd bytes as int16 (their preparation left out, in its favour), two
// vpmaddwd and two vpaddd for each 32 products; 6 chains an iteration.
__attribute__((target("avx2"))) void Int16Pairs(int64_t iterations) {
  __m256i w = _mm256_set1_epi16(3), x = _mm256_set1_epi16(-5);
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0;
  for (int64_t i = 0; i < iterations; ++i) {
    __m256i t0, t1, t2, t3, t4, t5;
    asm volatile(
        "vpmaddwd %12, %13, %6\n\tvpaddd %6, %0, %0\n\tvpmaddwd %13, %12, %6\n\tvpaddd %6, %0, %0\n\t"
        "vpmaddwd %12, %13, %7\n\tvpaddd %7, %1, %1\n\tvpmaddwd %13, %12, %7\n\tvpaddd %7, %1, %1\n\t"
        "vpmaddwd %12, %13, %8\n\tvpaddd %8, %2, %2\n\tvpmaddwd %13, %12, %8\n\tvpaddd %8, %2, %2\n\t"
        "vpmaddwd %12, %13, %9\n\tvpaddd %9, %3, %3\n\tvpmaddwd %13, %12, %9\n\tvpaddd %9, %3, %3\n\t"
        "vpmaddwd %12, %13, %10\n\tvpaddd %10, %4, %4\n\tvpmaddwd %13, %12, %10\n\tvpaddd %10, %4, %4\n\t"
        "vpmaddwd %12, %13, %11\n\tvpaddd %11, %5, %5\n\tvpmaddwd %13, %12, %11\n\tvpaddd %11, %5, %5"
        : "+x"(s0), "+x"(s1), "+x"(s2), "+x"(s3), "+x"(s4), "+x"(s5), "=&x"(t0), "=&x"(t1), "=&x"(t2), "=&x"(t3),
          "=&x"(t4), "=&x"(t5)
        : "x"(w), "x"(x));
  }
}

// 10 vpdpbusd an iteration, into 10 accumulators (latency hidden).
__attribute__((target("avx512f,avx512vnni"))) void Dpbusd(int64_t iterations) {
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5);
  __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0, s8 = s0,
          s9 = s0;
  for (int64_t i = 0; i < iterations; ++i) {
    asm volatile(
        "vpdpbusd %10, %11, %0\n\tvpdpbusd %10, %11, %1\n\tvpdpbusd %10, %11, %2\n\t"
        "vpdpbusd %10, %11, %3\n\tvpdpbusd %10, %11, %4\n\tvpdpbusd %10, %11, %5\n\t"
        "vpdpbusd %10, %11, %6\n\tvpdpbusd %10, %11, %7\n\tvpdpbusd %10, %11, %8\n\t"
        "vpdpbusd %10, %11, %9"
        : "+v"(s0), "+v"(s1), "+v"(s2), "+v"(s3), "+v"(s4), "+v"(s5), "+v"(s6), "+v"(s7), "+v"(s8), "+v"(s9)
        : "v"(a), "v"(b));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = std::max(1, argc > 1 ? std::atoi(argv[1]) : 2);
  const double clock_ghz = 16.0 * kIterations / BestSeconds(threads, AddChain) / 1e9;
  std::printf("clock %.2f GHz (%d threads)\n", clock_ghz, threads);
  auto report = [&](const char* name, int per_iteration, int macs, const std::function<void(int64_t)>& body) {
    const double seconds = BestSeconds(threads, body);
    const double instructions = static_cast<double>(per_iteration) * kIterations * threads;
    std::printf("%-16s %8.1f G multiply-adds/s  %.2f instructions a cycle a thread\n", name,
                instructions * macs / seconds / 1e9, instructions / threads / seconds / (clock_ghz * 1e9));
  };
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512vnni")) report("vpdpbusd", 10, 64, Dpbusd);
  if (__builtin_cpu_supports("avx2")) {
    report("vpmaddubsw", 10, 32, Maddubs);
    report("vpmaddubsw+vpaddw", 5, 32, MaddubsAdd);
    report("signed", 6, 32, SignedSequence);
    report("int16 pairs", 6, 32, Int16Pairs);
  }
  return 0;
}
