// What holding the keys' limits in Redis adds to a request (docs/gateway.md,
// "Keys and limits"): Keyring::Admit of a key with a requests and a tokens limit,
// per process (A) and through SharedLimits on a Redis server (B), in rounds
// A B A B; p50 / p99 of each run and the added p50 / p99 of B over A, median of
// the pairs. The limits are high enough that every request is admitted.
//
//   key_admission REDIS_URL [REQUESTS_PER_RUN] [ROUNDS]
//   (benchmarks/key_admission.sh starts a redis-server and runs it)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gateway/keys/keyring.h"
#include "gateway/keys/shared_limits.h"
#include "percentile.h"

namespace {

double Now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// Microseconds per admission, one sample per request.
std::vector<double> Run(const tachyon::Keyring& ring, int n) {
  const tachyon::Keyring::Key& key = *ring.Find("secret");
  std::vector<double> us;
  us.reserve(n);
  for (int i = 0; i < n; ++i) {
    const auto start = std::chrono::steady_clock::now();
    tachyon::Keyring::Admission a = tachyon::Keyring::Admit(key, 100, Now());
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    if (!a.admitted) {
      std::fprintf(stderr, "key_admission: refused (%s): the limits should admit everything\n", a.message.c_str());
      std::exit(1);
    }
  }
  return us;
}

double Median(std::vector<double> v) { return Percentile(std::move(v), 0.5); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: key_admission REDIS_URL [REQUESTS_PER_RUN] [ROUNDS]\n");
    return 2;
  }
  const int n = argc > 2 ? std::atoi(argv[2]) : 20000;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 4;
  tachyon::MetricsRegistry metrics;
  auto shared_or = tachyon::SharedLimits::Open({.url = argv[1]}, &metrics);
  if (!shared_or.ok() || !(*shared_or)->up()) {
    std::fprintf(stderr, "key_admission: Redis at %s is not usable\n", argv[1]);
    return 1;
  }
  std::shared_ptr<tachyon::SharedLimits> shared = std::move(*shared_or);
  tachyon::KeyConfig k{.name = "bench", .sha256 = tachyon::Sha256("secret"), .tenant = "bench"};
  k.requests_per_minute = 1000000000;
  k.tokens_per_minute = 1000000000;
  tachyon::Keyring local({k}, &metrics), remote({k}, &metrics, shared);
  Run(local, 1000);  // warm-up: connections, the script loaded
  Run(remote, 1000);
  std::vector<double> added_p50, added_p99;
  std::printf("%-6s %-8s %10s %10s %10s\n", "round", "limits", "p50 us", "p99 us", "max us");
  for (int r = 0; r < rounds; ++r) {
    const std::vector<double> a = Run(local, n), b = Run(remote, n);
    for (const auto& [name, v] : {std::pair{"local", &a}, std::pair{"redis", &b}}) {
      std::printf("%-6d %-8s %10.2f %10.2f %10.2f\n", r + 1, name, Percentile(*v, 0.5), Percentile(*v, 0.99),
                  *std::max_element(v->begin(), v->end()));
    }
    added_p50.push_back(Percentile(b, 0.5) - Percentile(a, 0.5));
    added_p99.push_back(Percentile(b, 0.99) - Percentile(a, 0.99));
  }
  std::printf("added by Redis (median of %d pairs, %d admissions each): p50 %.3f ms, p99 %.3f ms\n", rounds, n,
              Median(added_p50) / 1000, Median(added_p99) / 1000);
  return 0;
}
