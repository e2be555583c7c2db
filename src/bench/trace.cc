#include "bench/trace.h"

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tachyon {
namespace {

// "2023-11-16 18:17:03.9799600" -> seconds since the epoch (UTC), or -1.
double ParseAzureTimestamp(const std::string& s) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%d-%d-%d %d:%d:%d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                  &tm.tm_sec, &consumed) != 6) {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  double seconds = static_cast<double>(timegm(&tm));
  if (consumed < static_cast<int>(s.size()) && s[consumed] == '.') seconds += std::stod("0" + s.substr(consumed));
  return seconds;
}

}  // namespace

StatusOr<std::vector<TraceRequest>> ReadAzureTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot open");
  std::string line;
  if (!std::getline(in, line) || line.rfind("TIMESTAMP,ContextTokens,GeneratedTokens", 0) != 0) {
    return InvalidArgumentError(path + ": expected the header TIMESTAMP,ContextTokens,GeneratedTokens");
  }
  std::vector<TraceRequest> out;
  double first = -1;
  for (int line_number = 2; std::getline(in, line); ++line_number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::stringstream ss(line);
    std::string timestamp, context, generated;
    if (!std::getline(ss, timestamp, ',') || !std::getline(ss, context, ',') || !std::getline(ss, generated)) {
      return InvalidArgumentError(path + ":" + std::to_string(line_number) + ": expected 3 comma-separated fields");
    }
    double t = ParseAzureTimestamp(timestamp);
    char* end1 = nullptr;
    char* end2 = nullptr;
    long long input = std::strtoll(context.c_str(), &end1, 10), output = std::strtoll(generated.c_str(), &end2, 10);
    if (t < 0 || *end1 != '\0' || *end2 != '\0' || input < 0 || output < 0) {
      return InvalidArgumentError(path + ":" + std::to_string(line_number) + ": cannot parse '" + line + "'");
    }
    if (first < 0) first = t;
    out.push_back({t - first, input, output, {}});
  }
  return out;
}

StatusOr<std::vector<TraceRequest>> ReadMooncakeTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot open");
  std::vector<TraceRequest> out;
  std::string line;
  double first = -1;
  for (int line_number = 1; std::getline(in, line); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    auto bad = [&](const std::string& why) {
      return InvalidArgumentError(path + ":" + std::to_string(line_number) + ": " + why);
    };
    if (!j.is_object()) return bad("not a JSON object");
    for (const char* key : {"timestamp", "input_length", "output_length"}) {
      if (!j.contains(key) || !j[key].is_number()) return bad(std::string("'") + key + "' must be a number");
    }
    TraceRequest r;
    const double t = j["timestamp"].get<double>() / 1000.0;
    if (first < 0) first = t;
    r.arrival_seconds = t - first;
    r.input_tokens = j["input_length"].get<int64_t>();
    r.output_tokens = j["output_length"].get<int64_t>();
    if (j.contains("hash_ids")) {
      if (!j["hash_ids"].is_array()) return bad("'hash_ids' must be an array");
      for (const auto& id : j["hash_ids"]) {
        if (!id.is_number_integer()) return bad("'hash_ids' must hold integers");
        r.hash_ids.push_back(id.get<int64_t>());
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace tachyon
