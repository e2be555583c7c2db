#include "api/embeddings.h"

#include <gtest/gtest.h>

#include <cstring>

namespace tachyon {
namespace {

EmbeddingRequest Ok(std::string_view body) {
  auto parsed = ParseEmbeddingRequest(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) ADD_FAILURE() << body << ": " << e->message;
  return std::get<EmbeddingRequest>(parsed);
}

ApiError Error(std::string_view body) {
  auto parsed = ParseEmbeddingRequest(body);
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed)) << body;
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError{};
}

TEST(EmbeddingRequestTest, EveryInputShape) {
  EmbeddingRequest one = Ok(R"({"model":"m","input":"hello"})");
  EXPECT_EQ(one.texts, std::vector<std::string>{"hello"});
  EXPECT_FALSE(one.inputs_are_tokens);
  EXPECT_FALSE(one.base64);
  EmbeddingRequest many = Ok(R"({"model":"m","input":["a","b"],"encoding_format":"base64","dimensions":8,"truncate":true,"user":"u"})");
  EXPECT_EQ(many.num_inputs(), 2u);
  EXPECT_TRUE(many.base64);
  EXPECT_EQ(many.dimensions, 8);
  EXPECT_TRUE(many.truncate);
  EmbeddingRequest ids = Ok(R"({"model":"m","input":[101,7592,102]})");
  ASSERT_TRUE(ids.inputs_are_tokens);
  EXPECT_EQ(ids.token_inputs, (std::vector<std::vector<int64_t>>{{101, 7592, 102}}));
  EmbeddingRequest nested = Ok(R"({"model":"m","input":[[1,2],[3]]})");
  EXPECT_EQ(nested.token_inputs, (std::vector<std::vector<int64_t>>{{1, 2}, {3}}));
}

TEST(EmbeddingRequestTest, ErrorsNameTheField) {
  EXPECT_EQ(Error(R"({"model":7,"input":"x"})").param, "model");
  EXPECT_EQ(Ok(R"({"input":"x"})").model, "");  // the server's only embedding model
  EXPECT_EQ(Error(R"({"model":"m"})").param, "input");
  EXPECT_NE(Error(R"({"model":"m","input":""})").message.find("empty string"), std::string::npos);
  EXPECT_NE(Error(R"({"model":"m","input":[]})").message.find("empty array"), std::string::npos);
  EXPECT_NE(Error(R"({"model":"m","input":["a",""]})").message.find("input[1]"), std::string::npos);
  EXPECT_NE(Error(R"({"model":"m","input":["a",3]})").message.find("input[1]"), std::string::npos);
  EXPECT_NE(Error(R"({"model":"m","input":[1,-2]})").message.find("input[1]"), std::string::npos);
  EXPECT_NE(Error(R"({"model":"m","input":[[1],[]]})").message.find("input[1]"), std::string::npos);
  EXPECT_NE(Error(R"({"model":"m","input":[[1],[2.5]]})").message.find("input[1][0]"), std::string::npos);
  EXPECT_EQ(Error(R"({"model":"m","input":{"a":1}})").param, "input");
  EXPECT_EQ(Error(R"({"model":"m","input":"x","encoding_format":"int8"})").param, "encoding_format");
  EXPECT_EQ(Error(R"({"model":"m","input":"x","dimensions":0})").param, "dimensions");
  EXPECT_EQ(Error(R"({"model":"m","input":"x","truncate":"yes"})").param, "truncate");
  EXPECT_NE(Error(R"({"model":"m","input":"x")").message.find("not valid JSON"), std::string::npos);
  std::string seventeen = R"({"model":"m","input":[)";
  for (int i = 0; i < 17; ++i) seventeen += std::string(i ? "," : "") + "\"t\"";
  std::optional<ApiError> limit = CheckEmbeddingInputLimit(Ok(seventeen + "]}"), 16);
  ASSERT_TRUE(limit.has_value());
  EXPECT_NE(limit->message.find("17 items, more than the limit of 16"), std::string::npos);
  EXPECT_FALSE(CheckEmbeddingInputLimit(Ok(seventeen + "]}"), 17).has_value());
}

TEST(EmbeddingResponseTest, FloatAndBase64AndShortened) {
  std::vector<float> v = {0.6f, 0.8f, 0.0f, 1.0f, 0.0f, 0.0f};  // two rows of 3
  nlohmann::json floats = nlohmann::json::parse(EmbeddingResponseBody(v, 2, 3, false, "m", 7));
  EXPECT_EQ(floats["object"], "list");
  EXPECT_EQ(floats["data"][1]["index"], 1);
  EXPECT_EQ(floats["data"][1]["object"], "embedding");
  EXPECT_FLOAT_EQ(floats["data"][0]["embedding"][1].get<float>(), 0.8f);
  EXPECT_EQ(floats["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(floats["usage"]["total_tokens"], 7);
  nlohmann::json b64 = nlohmann::json::parse(EmbeddingResponseBody(v, 2, 3, true, "m", 7));
  // 1.0f is 0x3f800000: bytes 00 00 80 3f after two zero floats of row 1.
  EXPECT_EQ(b64["data"][1]["embedding"], Base64Encode(std::string("\x00\x00\x80\x3f", 4) + std::string(8, '\0')));
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  for (const std::string& plain : std::vector<std::string>{"", "f", "fo", "foo", "foob", std::string("\x00\xff\x80", 3)}) {
    std::string back;
    ASSERT_TRUE(Base64Decode(Base64Encode(plain), &back));
    EXPECT_EQ(back, plain);
  }
  std::string junk;
  EXPECT_FALSE(Base64Decode("Zm9v!", &junk));
  std::vector<float> cut = ShortenEmbeddings(v, 2, 3, 1);
  EXPECT_EQ(cut, (std::vector<float>{1.0f, 1.0f}));  // renormalized after the cut
}

}  // namespace
}  // namespace tachyon
