#include "server/origin_policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace tachyon {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "host:port", "[v6]:port" or "host" -> the host, lower-case, without brackets.
std::string HostOf(const std::string& authority) {
  if (!authority.empty() && authority[0] == '[') {
    const size_t end = authority.find(']');
    return Lower(authority.substr(1, end == std::string::npos ? std::string::npos : end - 1));
  }
  const size_t colon = authority.rfind(':');
  return Lower(colon == std::string::npos ? authority : authority.substr(0, colon));
}

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

bool Listed(const std::vector<std::string>& list, const std::string& value) {
  return std::any_of(list.begin(), list.end(),
                     [&](const std::string& item) { return item == "*" || Lower(item) == Lower(value); });
}

const std::string* Header(const HttpRequest& r, const char* name) {
  auto it = r.headers.find(name);
  return it == r.headers.end() ? nullptr : &it->second;
}

}  // namespace

OriginVerdict CheckOrigin(const OriginPolicyOptions& o, const HttpRequest& r) {
  const std::string* host = Header(r, "host");
  if (!o.has_api_key && host != nullptr) {
    const std::string name = HostOf(*host);
    if (!IsIpLiteral(name) && name != "localhost" && name != Lower(o.listen_host) && !Listed(o.allowed_hosts, name)) {
      return {.kind = OriginVerdict::Kind::kRefuse,
              .message = "the Host '" + *host + "' is not this server's (a server without an API key answers its "
                         "address, localhost and --allowed-hosts only)",
              .code = "host_not_allowed"};
    }
  }
  const std::string* origin = Header(r, "origin");
  if (origin == nullptr) return {};
  if (Listed(o.allowed_origins, *origin)) return {.kind = OriginVerdict::Kind::kCors, .origin = *origin};
  // Same origin: the page was served by this very host and port.
  const size_t scheme = origin->find("://");
  if (host != nullptr && scheme != std::string::npos && Lower(origin->substr(scheme + 3)) == Lower(*host)) return {};
  if (o.has_api_key) return {};
  return {.kind = OriginVerdict::Kind::kRefuse,
          .message = "cross-origin request from '" + *origin + "' refused (a server without an API key answers "
                     "other origins only when --allowed-origins names them)",
          .code = "origin_not_allowed"};
}

HttpHeaders CorsHeaders(const std::string& origin, bool preflight) {
  HttpHeaders h = {{"Access-Control-Allow-Origin", origin}, {"Vary", "Origin"}};
  if (preflight) {
    h.emplace_back("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    h.emplace_back("Access-Control-Allow-Headers", "authorization, content-type, x-request-id");
    h.emplace_back("Access-Control-Max-Age", "600");
  } else {
    h.emplace_back("Access-Control-Expose-Headers",
                   "x-request-id, x-tachyon-route, x-tachyon-backend, x-tachyon-cache, x-tachyon-trimmed-tokens");
  }
  return h;
}

}  // namespace tachyon
