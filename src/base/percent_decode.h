// %XX escapes decoded (URL user info, OTEL_EXPORTER_OTLP_HEADERS values).
#pragma once

#include <cctype>
#include <cstdlib>
#include <string>

namespace tachyon {

// Every "%XX" of `in` as its byte; false on a broken escape ("%", "%4", "%zz").
inline bool PercentDecode(const std::string& in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size() || !std::isxdigit(static_cast<unsigned char>(in[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(in[i + 2]))) {
      return false;
    }
    out->push_back(static_cast<char>(std::strtol(in.substr(i + 1, 2).c_str(), nullptr, 16)));
    i += 2;
  }
  return true;
}

}  // namespace tachyon
