// The Asio side of EventLoop (http_client.h), for the two files of src/http/ that
// run loops: HttpServer's I/O threads publish theirs; HttpClient can run on one.
#pragma once

#include <boost/asio/io_context.hpp>

#include "http/http_client.h"

namespace tachyon {

struct EventLoop {
  boost::asio::io_context* io = nullptr;
};

// Marks the calling thread as running `loop` (null: none).
void SetCurrentEventLoop(EventLoop* loop);

}  // namespace tachyon
