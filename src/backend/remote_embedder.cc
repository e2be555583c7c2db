#include "backend/remote_embedder.h"

#include <cstring>
#include <future>
#include <nlohmann/json.hpp>

#include "api/embeddings.h"
#include "api/json_parse.h"
#include "api/openai.h"

namespace tachyon {
StatusOr<std::unique_ptr<RemoteEmbedder>> RemoteEmbedder::Create(const RemoteEmbedderOptions& options) {
  std::unique_ptr<RemoteEmbedder> e(new RemoteEmbedder());
  e->options_ = options;
  ASSIGN_OR_RETURN(e->url_, ParseHttpUrl(options.base_url));
  if (options.model.empty()) return InvalidArgumentError("a remote embedder needs the upstream's model name");
  if (options.max_batch < 1) return InvalidArgumentError("max_batch must be at least 1");
  e->id_ = "remote:" + options.base_url + "#" + options.model +
           (options.dimensions > 0 ? ":d" + std::to_string(options.dimensions) : "");
  e->dimension_ = options.dimensions;
  e->client_ = std::make_unique<HttpClient>(HttpClientOptions{.verify_peer = options.verify_tls,
                                                              .ca_file = options.ca_file,
                                                              .user_agent = "tachyon"});
  e->thread_ = std::thread([client = e->client_.get()] { client->RunUntilStopped(); });
  return e;
}

RemoteEmbedder::~RemoteEmbedder() {
  if (client_) client_->Stop();
  if (thread_.joinable()) thread_.join();
}

int RemoteEmbedder::dimension() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dimension_;
}

StatusOr<std::vector<float>> RemoteEmbedder::Embed(std::span<const std::string> texts) {
  std::vector<float> out;
  for (size_t start = 0; start < texts.size(); start += options_.max_batch) {
    const size_t n = std::min(options_.max_batch, texts.size() - start);
    ASSIGN_OR_RETURN(std::vector<float> part, EmbedBatch(texts.subspan(start, n)));
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

StatusOr<std::vector<float>> RemoteEmbedder::EmbedBatch(std::span<const std::string> texts) {
  nlohmann::json body = {{"model", options_.model},
                         {"input", std::vector<std::string>(texts.begin(), texts.end())},
                         {"encoding_format", "float"}};
  if (options_.dimensions > 0) body["dimensions"] = options_.dimensions;
  HttpClientRequest request{.method = "POST",
                            .host = url_.host,
                            .port = url_.port,
                            .target = url_.path + "/embeddings",
                            .headers = {{"Content-Type", "application/json"}},
                            .body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                            .timeout_seconds = options_.timeout_seconds,
                            .tls = url_.tls};
  if (!options_.api_key.empty()) request.headers.emplace_back("Authorization", "Bearer " + options_.api_key);
  struct Exchange {
    int status = 0;
    std::string body;
    std::promise<Status> done;
  };
  auto exchange = std::make_shared<Exchange>();
  std::future<Status> finished = exchange->done.get_future();
  client_->Send(std::move(request), {.on_head = [exchange](const HttpResponseHead& h) { exchange->status = h.status; },
                                     .on_data = [exchange](std::string_view d) { exchange->body.append(d); },
                                     .on_done = [exchange](const Status& s) { exchange->done.set_value(s); }});
  const Status status = finished.get();
  const std::string where = options_.base_url + "/embeddings";
  if (!status.ok()) return Status(status.code(), where + ": " + status.message());
  if (exchange->status != 200) {
    return UnavailableError(where + " answered " + std::to_string(exchange->status) + ": " +
                            ErrorMessageOf(exchange->body));
  }
  nlohmann::json answer = ParseJson(exchange->body);
  if (answer.is_discarded() || !answer.contains("data") || !answer["data"].is_array() ||
      answer["data"].size() != texts.size()) {
    return DataLossError(where + ": the answer is not a list of " + std::to_string(texts.size()) + " embeddings");
  }
  int dim = 0;
  std::vector<float> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    const nlohmann::json& item = answer["data"][i];
    const size_t index = item.contains("index") && item["index"].is_number_unsigned() ? item["index"].get<size_t>() : i;
    const nlohmann::json& e = item.contains("embedding") ? item["embedding"] : nlohmann::json();
    std::vector<float> v;
    if (e.is_array()) {
      for (const nlohmann::json& x : e) {
        if (!x.is_number()) return DataLossError(where + ": embedding " + std::to_string(i) + " is not numbers");
        v.push_back(x.get<float>());
      }
    } else if (std::string bytes; e.is_string() && Base64Decode(e.get<std::string>(), &bytes) && bytes.size() % 4 == 0) {
      v.resize(bytes.size() / 4);
      std::memcpy(v.data(), bytes.data(), bytes.size());
    } else {
      return DataLossError(where + ": embedding " + std::to_string(i) + " is neither floats nor base64");
    }
    if (i == 0) dim = static_cast<int>(v.size());
    if (dim == 0 || static_cast<int>(v.size()) != dim || index != i) {
      return DataLossError(where + ": embedding " + std::to_string(i) + " has " + std::to_string(v.size()) +
                           " numbers (index " + std::to_string(index) + "), the first " + std::to_string(dim));
    }
    out.insert(out.end(), v.begin(), v.end());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (dimension_ == 0) dimension_ = dim;
    if (dimension_ != dim) {
      return DataLossError(where + ": embeddings of " + std::to_string(dim) + " numbers after " +
                           std::to_string(dimension_));
    }
  }
  NormalizeRows(out.data(), texts.size(), dim);
  return out;
}

}  // namespace tachyon
