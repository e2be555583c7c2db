// libFuzzer target: every chat template family on arbitrary messages. The input is
// split at NUL bytes into role, content, role, content...; the first byte picks the
// family and whether a generation prompt is added. Rendering must return the text
// or an error, never crash; the content ranges it reports must be sorted, inside
// the text, and hold exactly the messages' contents; the prompt then tokenizes with
// those ranges as literal text.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"
#include "builtin_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace tachyon;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)fuzz::BuiltinTokenizer("tachyon_chat_template_fuzz");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::vector<std::string> names = ChatTemplate::KnownNames();
  StatusOr<ChatTemplate> chat = ChatTemplate::FromName(names[data[0] % names.size()]);
  if (!chat.ok()) std::abort();
  const bool add_generation = (data[0] & 0x80) != 0;
  std::vector<std::string> fields;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  while (true) {
    const size_t nul = rest.find('\0');
    fields.emplace_back(rest.substr(0, nul));
    if (nul == std::string_view::npos) break;
    rest.remove_prefix(nul + 1);
  }
  static const char* kRoles[] = {"system", "user", "assistant", "tool"};
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    // A role byte picks a known role most of the time, the field itself otherwise.
    const std::string role = !fields[i].empty() && static_cast<uint8_t>(fields[i][0]) < 0xF0
                                 ? kRoles[static_cast<uint8_t>(fields[i][0]) % 4]
                                 : fields[i];
    messages.push_back({role, fields[i + 1]});
  }
  std::vector<std::pair<size_t, size_t>> ranges;
  StatusOr<std::string> text = chat->Render(messages, add_generation, &ranges);
  if (!text.ok()) return 0;
  size_t previous_end = 0, content_bytes = 0, message_bytes = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin < previous_end || end < begin || end > text->size()) std::abort();
    previous_end = end;
    content_bytes += end - begin;
  }
  for (const ChatMessage& m : messages) message_bytes += m.content.size();
  if (content_bytes > message_bytes) std::abort();  // a range holds message text only
  const Tokenizer& tok = fuzz::BuiltinTokenizer("tachyon_chat_template_fuzz");
  std::vector<TokenId> ids = tok.Encode(*text, {.add_special = true, .parse_special = true, .literal_ranges = ranges});
  for (TokenId id : ids) {
    if (!tok.vocab().IsValid(id)) std::abort();
  }
  return 0;
}
