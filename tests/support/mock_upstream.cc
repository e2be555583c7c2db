// mock_upstream: a fast OpenAI-style server that does no work, for measuring
// what sits in front of an upstream (tachyon bench's client, the gateway) and for
// the gateway's fault tests. It answers POST .../completions and
// .../chat/completions with max_tokens chunks of OpenAI's size (" tok"), a usage
// chunk and [DONE], or, for "stream": false, one JSON body; GET .../models lists "m".
//
//   mock_upstream --port 18500 [--gap-ms 0] [--first-byte-ms 0] [--status 200] [--hang]
//   --port 0            any free port; the first stdout line is "listening on http://127.0.0.1:PORT"
//   --gap-ms 0          the whole response in one write (streams per second);
//   --gap-ms G          one chunk every G ms on a timer (added latency per chunk);
//   --first-byte-ms D   the response head D ms after the request (a slow upstream);
//   --slow-every N --slow-ms S
//                       every Nth completion request's head S ms late instead (a tail: one
//                       request in N), counted across connections in arrival order;
//   --status S          every completion answered S with an OpenAI error body (500: a failing upstream);
//   --hang              requests are read and never answered (a stuck upstream);
//   --retry-after S     with --status: a Retry-After: S header on the error;
//   --answer KIND       chat answers of another shape: tool_call (one call to get_weather, ended with
//                       finish_reason "stop" as OpenAI ends a named tool_choice), reasoning (a
//                       reasoning_content "SECRET-THOUGHT" before the content), echo_model (the content
//                       is " model=NAME", the model the request named).
// One thread, Asio coroutines, HTTP/1.1 keep-alive; no Beast parser on purpose.

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

struct Options {
  int port = 18500;
  int gap_ms = 0;
  int first_byte_ms = 0;
  int slow_every = 0, slow_ms = 0;
  int status = 200;
  bool hang = false;
  int retry_after = -1;
  std::string answer = "text";
};
Options options;
int completions = 0;  // completion requests so far (one thread: no lock)

std::string Chunk(const std::string& data) {
  char size[16];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  return size + data + "\r\n";
}

std::string Event(bool chat, bool last) {
  const char* reason = last ? "\"stop\"" : "null";
  if (chat) {
    return Chunk(std::string("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":"
                             "\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok\"},\"logprobs\":null,"
                             "\"finish_reason\":") + reason + "}]}\n\n");
  }
  return Chunk(std::string("data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":0,\"model\":\"m\","
                           "\"choices\":[{\"index\":0,\"text\":\" tok\",\"logprobs\":null,\"finish_reason\":") +
               reason + "}]}\n\n");
}

std::string Usage(int n) {
  return "{\"prompt_tokens\":16,\"completion_tokens\":" + std::to_string(n) + ",\"total_tokens\":" +
         std::to_string(16 + n) + "}";
}

std::string Tail(int n) {
  return Chunk("data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":0,\"model\":\"m\",\"choices\":[],"
               "\"usage\":" + Usage(n) + "}\n\n") +
         Chunk("data: [DONE]\n\n") + "0\r\n\r\n";
}

const std::string kStreamHead =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n";

std::string Whole(int status, const std::string& type, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + (status == 200 ? " OK" : " Error") + "\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: keep-alive\r\n\r\n" + body;
}

// The string value of `"key":"` in a JSON body (no escapes), or "".
std::string StringField(const std::string& body, const char* key) {
  const std::string k = std::string("\"") + key + "\":\"";
  const size_t at = body.find(k);
  if (at == std::string::npos) return "";
  const size_t end = body.find('"', at + k.size());
  return end == std::string::npos ? "" : body.substr(at + k.size(), end - at - k.size());
}

constexpr const char* kToolCall =
    "{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"}}";

std::string ChatEvent(const std::string& delta, const char* reason) {
  return Chunk("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\","
               "\"choices\":[{\"index\":0,\"delta\":" + delta + ",\"logprobs\":null,\"finish_reason\":" + reason +
               "}]}\n\n");
}

// A streamed chat answer of one of the --answer shapes other than text.
std::string ShapedStream(const std::string& model, int n) {
  std::string out = kStreamHead;
  if (options.answer == "tool_call") {
    out += ChatEvent(std::string("{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[") + kToolCall + "]}", "null");
    out += ChatEvent("{}", "\"stop\"");
  } else if (options.answer == "reasoning") {
    out += ChatEvent("{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"SECRET-THOUGHT\"}", "null");
    for (int i = 0; i < n; ++i) out += ChatEvent("{\"content\":\" tok\"}", i + 1 == n ? "\"stop\"" : "null");
  } else {  // echo_model
    out += ChatEvent("{\"role\":\"assistant\",\"content\":\" model=" + model + "\"}", "\"stop\"");
  }
  return out + Tail(n);
}

// The message of a whole chat answer of one of the --answer shapes other than text.
std::string ShapedMessage(const std::string& model, int n) {
  if (options.answer == "tool_call") {
    return std::string("{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[") + kToolCall + "]}";
  }
  if (options.answer == "reasoning") {
    std::string text;
    for (int i = 0; i < n; ++i) text += " tok";
    return "{\"role\":\"assistant\",\"content\":\"" + text + "\",\"reasoning_content\":\"SECRET-THOUGHT\"}";
  }
  return "{\"role\":\"assistant\",\"content\":\" model=" + model + "\"}";
}

std::string WholeAnswer(bool chat, int n, const std::string& model = "") {
  std::string text;
  for (int i = 0; i < n; ++i) text += " tok";
  const std::string message = chat && options.answer != "text"
                                  ? ShapedMessage(model, n)
                                  : "{\"role\":\"assistant\",\"content\":\"" + text + "\"}";
  const std::string choice = chat ? "{\"index\":0,\"message\":" + message + ",\"finish_reason\":\"stop\"}"
                                  : "{\"index\":0,\"text\":\"" + text + "\",\"finish_reason\":\"stop\"}";
  return Whole(200, "application/json",
               std::string("{\"id\":\"cmpl-1\",\"object\":\"") + (chat ? "chat.completion" : "text_completion") +
                   "\",\"created\":0,\"model\":\"m\",\"choices\":[" + choice + "],\"usage\":" + Usage(n) + "}");
}

// The value of `"key":` as an integer in a JSON body, or fallback.
long Field(const std::string& body, const char* key, long fallback) {
  const std::string k = std::string("\"") + key + "\":";
  size_t at = body.find(k);
  return at == std::string::npos ? fallback : std::strtol(body.c_str() + at + k.size(), nullptr, 10);
}

bool Streams(const std::string& body) {
  size_t at = body.find("\"stream\":");
  if (at == std::string::npos) return false;
  at += 9;
  while (at < body.size() && body[at] == ' ') ++at;
  return body.compare(at, 4, "true") == 0;
}

asio::awaitable<void> Session(tcp::socket socket) {
  socket.set_option(tcp::no_delay(true));
  std::string buffer;
  boost::system::error_code ec;
  asio::steady_timer timer(socket.get_executor());
  while (true) {
    const size_t head_end = co_await asio::async_read_until(socket, asio::dynamic_buffer(buffer), "\r\n\r\n",
                                                            asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    std::string head = buffer.substr(0, head_end);
    for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t length = 0;
    if (size_t at = head.find("content-length:"); at != std::string::npos) {
      length = std::strtoul(head.c_str() + at + 15, nullptr, 10);
    }
    if (buffer.size() < head_end + length) {
      co_await asio::async_read(socket, asio::dynamic_buffer(buffer), asio::transfer_exactly(head_end + length - buffer.size()),
                                asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
    }
    const std::string body = buffer.substr(head_end, length);
    buffer.erase(0, head_end + length);
    if (head.rfind("get ", 0) == 0) {
      const std::string models = Whole(200, "application/json", "{\"object\":\"list\",\"data\":[{\"id\":\"m\",\"object\":\"model\"}]}");
      co_await asio::async_write(socket, asio::buffer(models), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      continue;
    }
    if (options.hang) {
      // Read on until the client gives up; never answer.
      char sink[4096];
      while (!ec) co_await socket.async_read_some(asio::buffer(sink), asio::redirect_error(asio::use_awaitable, ec));
      co_return;
    }
    ++completions;
    const int late = options.slow_every > 0 && completions % options.slow_every == 0 ? options.slow_ms
                                                                                    : options.first_byte_ms;
    if (late > 0) {
      timer.expires_after(std::chrono::milliseconds(late));
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    if (options.status != 200) {
      std::string error = Whole(options.status, "application/json",
                                "{\"error\":{\"message\":\"mock upstream failure\",\"type\":\"server_error\","
                                "\"param\":null,\"code\":null}}");
      if (options.retry_after >= 0) {
        error.insert(error.find("\r\n") + 2, "Retry-After: " + std::to_string(options.retry_after) + "\r\n");
      }
      co_await asio::async_write(socket, asio::buffer(error), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      continue;
    }
    const bool chat = head.find("/chat/completions") != std::string::npos;
    const int n = static_cast<int>(std::max(1L, Field(body, "max_tokens", 16)));
    const std::string model = StringField(body, "model");
    if (!Streams(body)) {
      const std::string whole = WholeAnswer(chat, n, model);
      co_await asio::async_write(socket, asio::buffer(whole), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      continue;
    }
    if (chat && options.answer != "text") {
      const std::string response = ShapedStream(model, n);
      co_await asio::async_write(socket, asio::buffer(response), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      continue;
    }
    if (options.gap_ms == 0) {
      std::string response = kStreamHead;
      for (int i = 0; i < n; ++i) response += Event(chat, i + 1 == n);
      response += Tail(n);
      co_await asio::async_write(socket, asio::buffer(response), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      continue;
    }
    co_await asio::async_write(socket, asio::buffer(kStreamHead), asio::redirect_error(asio::use_awaitable, ec));
    auto next = std::chrono::steady_clock::now();
    for (int i = 0; i < n && !ec; ++i) {
      // The first chunk at once, then one every gap_ms on a fixed schedule.
      if (i > 0) {
        next += std::chrono::milliseconds(options.gap_ms);
        timer.expires_at(next);
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      const std::string event = Event(chat, i + 1 == n);
      co_await asio::async_write(socket, asio::buffer(event), asio::redirect_error(asio::use_awaitable, ec));
    }
    if (ec) co_return;
    const std::string tail = Tail(n);
    co_await asio::async_write(socket, asio::buffer(tail), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
  }
}

asio::awaitable<void> Listen(tcp::acceptor& acceptor) {
  while (true) {
    tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
    asio::co_spawn(acceptor.get_executor(), Session(std::move(socket)), asio::detached);
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    auto value = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (std::strcmp(argv[i], "--port") == 0) {
      options.port = value();
    } else if (std::strcmp(argv[i], "--gap-ms") == 0) {
      options.gap_ms = value();
    } else if (std::strcmp(argv[i], "--first-byte-ms") == 0) {
      options.first_byte_ms = value();
    } else if (std::strcmp(argv[i], "--slow-every") == 0) {
      options.slow_every = value();
    } else if (std::strcmp(argv[i], "--slow-ms") == 0) {
      options.slow_ms = value();
    } else if (std::strcmp(argv[i], "--status") == 0) {
      options.status = value();
    } else if (std::strcmp(argv[i], "--hang") == 0) {
      options.hang = true;
    } else if (std::strcmp(argv[i], "--retry-after") == 0) {
      options.retry_after = value();
    } else if (std::strcmp(argv[i], "--answer") == 0 && i + 1 < argc) {
      options.answer = argv[++i];
      if (options.answer != "text" && options.answer != "tool_call" && options.answer != "reasoning" &&
          options.answer != "echo_model") {
        std::fprintf(stderr, "mock_upstream: --answer must be text, tool_call, reasoning or echo_model\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "mock_upstream: unknown flag %s (see the comment at the top of mock_upstream.cc)\n", argv[i]);
      return 2;
    }
  }
  asio::io_context io(1);
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(options.port)));
  std::printf("listening on http://127.0.0.1:%d\n", acceptor.local_endpoint().port());
  std::fflush(stdout);
  asio::co_spawn(io, Listen(acceptor), asio::detached);
  io.run();
}
