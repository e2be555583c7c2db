#include "api/stream_chunk.h"

#include <simdjson.h>

namespace tachyon {

struct StreamChunkParser::Impl {
  simdjson::dom::parser parser;
  std::string padded;
};

StreamChunkParser::StreamChunkParser() : impl_(std::make_unique<Impl>()) {}
StreamChunkParser::~StreamChunkParser() = default;

bool StreamChunkParser::Parse(std::string_view data, bool chat, StreamChunk* out) {
  *out = StreamChunk{};
  impl_->padded.assign(data.begin(), data.end());
  impl_->padded.resize(data.size() + simdjson::SIMDJSON_PADDING, '\0');
  simdjson::dom::element doc;
  if (impl_->parser.parse(impl_->padded.data(), data.size(), false).get(doc)) return false;
  simdjson::dom::object obj;
  if (doc.get_object().get(obj)) return false;
  if (obj["error"].error() == simdjson::SUCCESS) {
    out->is_error = true;
    return true;
  }
  simdjson::dom::object usage;
  if (!obj["usage"].get_object().get(usage)) {
    out->has_usage = true;
    int64_t v = 0;
    // A count below zero is not a count: an upstream that sends one is read as
    // having sent none, so totals downstream never go negative.
    if (!usage["prompt_tokens"].get_int64().get(v) && v >= 0) out->prompt_tokens = v;
    if (!usage["completion_tokens"].get_int64().get(v) && v >= 0) out->completion_tokens = v;
    simdjson::dom::object details;
    if (!usage["prompt_tokens_details"].get_object().get(details) && !details["cached_tokens"].get_int64().get(v) &&
        v >= 0) {
      out->cached_tokens = v;
    }
  }
  simdjson::dom::array choices;
  simdjson::dom::object choice;
  if (obj["choices"].get_array().get(choices) || choices.size() == 0 || choices.at(0).get_object().get(choice)) {
    return true;
  }
  out->has_choice = true;
  std::string_view reason;
  if (!choice["finish_reason"].get_string().get(reason)) out->finish_reason = reason;
  std::string_view text;
  if (chat) {
    simdjson::dom::object delta;
    if (choice["delta"].get_object().get(delta)) return true;
    simdjson::dom::array calls;
    if (!delta["tool_calls"].get_array().get(calls)) {
      out->has_tool_calls = calls.size() > 0;
      for (simdjson::dom::element call : calls) {
        std::string_view piece;
        if (!call["function"]["name"].get_string().get(piece)) out->tool_text += piece;
        if (!call["function"]["arguments"].get_string().get(piece)) out->tool_text += piece;
      }
    }
    simdjson::dom::object function_call;
    if (!delta["function_call"].get_object().get(function_call)) out->has_tool_calls = true;
    if (delta["content"].get_string().get(text) || text.empty()) {
      if (delta["reasoning_content"].get_string().get(text)) return true;
      out->text_is_reasoning = !text.empty();
    }
  } else if (choice["text"].get_string().get(text)) {
    return true;
  }
  out->text = text;
  return true;
}

}  // namespace tachyon
