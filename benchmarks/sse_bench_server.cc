// A trivial OpenAI-style streaming server for measuring the load generator itself
// (benchmarks/client_overhead.sh): it answers POST .../completions at once with
// max_tokens SSE chunks (about the size of OpenAI's), a usage chunk and [DONE], and
// does no other work, so what `tachyon bench` measures against it is the client's
// own cost plus loopback.
//
//   sse_bench_server --port 18500 [--gap-ms 0]
//   --gap-ms 0: the whole response in one write (streams per second);
//   --gap-ms G: one chunk every G ms on a timer (added latency per chunk: the
//               client's ITL minus G, its TTFT minus 0).
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

std::string Chunk(const std::string& data) {
  char size[16];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  return size + data + "\r\n";
}

const std::string kEvent = Chunk(
    "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":0,\"model\":\"m\",\"choices\":[{\"index\":0,"
    "\"text\":\" tok\",\"logprobs\":null,\"finish_reason\":null}]}\n\n");

std::string Tail(int n) {
  return Chunk("data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":0,\"model\":\"m\",\"choices\":[],"
               "\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":" + std::to_string(n) +
               ",\"total_tokens\":" + std::to_string(16 + n) + "}}\n\n") +
         Chunk("data: [DONE]\n\n") + "0\r\n\r\n";
}

const std::string kHead =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n";

int gap_ms = 0;

// The value of `"key":` as an integer in a JSON body, or fallback.
long Field(const std::string& body, const char* key, long fallback) {
  const std::string k = std::string("\"") + key + "\":";
  size_t at = body.find(k);
  return at == std::string::npos ? fallback : std::strtol(body.c_str() + at + k.size(), nullptr, 10);
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
    const int n = static_cast<int>(std::max(1L, Field(body, "max_tokens", 16)));
    if (gap_ms == 0) {
      std::string response = kHead;
      response.reserve(kHead.size() + kEvent.size() * n + 256);
      for (int i = 0; i < n; ++i) response += kEvent;
      response += Tail(n);
      co_await asio::async_write(socket, asio::buffer(response), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      continue;
    }
    co_await asio::async_write(socket, asio::buffer(kHead), asio::redirect_error(asio::use_awaitable, ec));
    auto next = std::chrono::steady_clock::now();
    for (int i = 0; i < n && !ec; ++i) {
      // The first chunk at once, then one every gap_ms on a fixed schedule.
      if (i > 0) {
        next += std::chrono::milliseconds(gap_ms);
        timer.expires_at(next);
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      co_await asio::async_write(socket, asio::buffer(kEvent), asio::redirect_error(asio::use_awaitable, ec));
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
  int port = 18500;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--port") == 0) port = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--gap-ms") == 0) gap_ms = std::atoi(argv[i + 1]);
  }
  asio::io_context io(1);
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  std::printf("listening on http://127.0.0.1:%d\n", port);
  std::fflush(stdout);
  asio::co_spawn(io, Listen(acceptor), asio::detached);
  io.run();
}
