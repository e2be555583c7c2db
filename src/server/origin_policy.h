// OriginPolicy: what a server on a network port says to browsers.
//
// Without an API key, any web page a user opens could drive the server: by a
// cross-site request (the page's own origin in `Origin`), or by DNS rebinding
// (a name the page controls, pointed at 127.0.0.1: `Host` then carries that
// name). So a server with no key refuses a request whose Host is not an IP
// literal, `localhost`, the listen address or one of --allowed-hosts, and one
// whose Origin is neither its own (same host and port as Host) nor one of
// --allowed-origins. With a key, both pass: a cross-site page cannot send the
// Authorization header without a preflight that gets no CORS answer.
// CORS headers are sent only to --allowed-origins ("*": any), never by default.
//
// Pure: the request's headers in, a verdict out.
#pragma once

#include <string>
#include <vector>

#include "http/http_server.h"

namespace tachyon {

struct OriginPolicyOptions {
  std::vector<std::string> allowed_origins;  // "https://app.example.com", or "*"
  std::vector<std::string> allowed_hosts;    // "tachyon.internal", or "*"
  std::string listen_host;                   // --host
  bool has_api_key = false;
};

struct OriginVerdict {
  enum class Kind { kPass, kCors, kRefuse };
  Kind kind = Kind::kPass;
  std::string origin;   // kCors: the origin to echo in Access-Control-Allow-Origin
  std::string message;  // kRefuse: why (a 403)
  std::string code;     // kRefuse: "host_not_allowed" or "origin_not_allowed"
};

OriginVerdict CheckOrigin(const OriginPolicyOptions& options, const HttpRequest& request);

// The headers of a CORS answer to origin (and of the preflight, when `preflight`).
HttpHeaders CorsHeaders(const std::string& origin, bool preflight);

}  // namespace tachyon
