// Capture files are read from disk by `tachyon audit` and the replay workload:
// any bytes, one line at a time, through ParseCaptureLine and the audit, then the
// report in every form. Nothing may crash, throw or hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "audit/audit_report.h"
#include "audit/traffic_audit.h"
#include "obs/capture.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto audit = tachyon::TrafficAudit::Create({});
  if (!audit.ok()) return 0;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  tachyon::CapturedRequest r;
  std::string error;
  int64_t number = 0;
  while (!input.empty()) {
    const size_t end = input.find('\n');
    const std::string_view line = input.substr(0, end);
    input = end == std::string_view::npos ? std::string_view() : input.substr(end + 1);
    ++number;
    if (tachyon::ParseCaptureLine(line, &r, &error)) {
      (*audit)->Add(r);
    } else {
      (*audit)->AddMalformed(number, error);
    }
  }
  const nlohmann::json report = (*audit)->Finish();
  tachyon::AuditText(report, "fuzz");
  tachyon::AuditHtml(report, "fuzz");
  return 0;
}
