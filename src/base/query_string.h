// The name=value pairs of a URL's query string, percent-decoded: the admin
// routes' ?route=&tenant=, /v1/stats' ?window=&step=, /dashboard's ?key=,
// /v1/responses/{id}/input_items' ?limit=&order=&after=.
#pragma once

#include <map>
#include <string>

#include "base/percent_decode.h"

namespace tachyon {

// "a=1&b=x%20y" as {a: "1", b: "x y"}. A name without '=' has the value "";
// a name given twice keeps its first value; a pair whose escape is broken
// ("%zz") is left out. '+' stays '+' (RFC 3986: a key may hold one).
inline std::map<std::string, std::string> ParseQuery(const std::string& query) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start < query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string::npos) end = query.size();
    const std::string pair = query.substr(start, end - start);
    start = end + 1;
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    std::string name, value;
    if (!PercentDecode(pair.substr(0, eq), &name)) continue;
    if (eq != std::string::npos && !PercentDecode(pair.substr(eq + 1), &value)) continue;
    out.emplace(std::move(name), std::move(value));
  }
  return out;
}

// The query of a request target ("/path?a=1" -> "a=1"); "" without one.
inline std::string QueryOf(const std::string& target) {
  const size_t q = target.find('?');
  return q == std::string::npos ? "" : target.substr(q + 1);
}

}  // namespace tachyon
