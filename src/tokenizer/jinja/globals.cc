// The globals a chat template may call: raise_exception, strftime_now,
// namespace, dict, range.
#include <ctime>

#include "tokenizer/jinja/internal.h"

namespace tachyon::jinja::internal {

void Renderer::InstallGlobals() {
  Frame& g = frames_[0];
  g["raise_exception"] = Value::MakeFunction("raise_exception", [](CallArgs& a) -> Value {
    Fail("TemplateError", ToStr(Arg(a, 0, "message")));
  });
  const int64_t now = now_;
  g["strftime_now"] = Value::MakeFunction("strftime_now", [now](CallArgs& a) {
    const std::string format = ToStr(Arg(a, 0, "format"));
    const std::time_t t = static_cast<std::time_t>(now);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof(buf), format.c_str(), &tm);
    return Value(std::string(buf, n));
  });
  g["namespace"] = Value::MakeFunction("namespace", [](CallArgs& a) {
    Value ns = Value::MakeDict();
    ns.dict().is_namespace = true;
    for (const Value& p : a.positional) {
      if (p.is_dict()) {
        for (const auto& [k, v] : p.dict().items) ns.dict().Set(k, v);
      }
    }
    for (const auto& [k, v] : a.keyword) ns.dict().Set(k, v);
    return ns;
  });
  g["dict"] = Value::MakeFunction("dict", [](CallArgs& a) {
    Value d = Value::MakeDict();
    for (const auto& [k, v] : a.keyword) d.dict().Set(k, v);
    return d;
  });
  const Options options = options_;
  g["range"] = Value::MakeFunction("range", [options](CallArgs& a) {
    int64_t start = 0, stop = 0, step = 1;
    if (a.positional.size() == 1) {
      stop = a.positional[0].as_int();
    } else if (a.positional.size() >= 2) {
      start = a.positional[0].as_int();
      stop = a.positional[1].as_int();
      if (a.positional.size() > 2) step = a.positional[2].as_int();
    }
    if (step == 0) Fail("ValueError", "range() arg 3 must not be zero");
    Value::List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      if (out.size() >= 1'000'000) Fail("TemplateError", "range() too large");
      out.emplace_back(i);
      if (__builtin_add_overflow(i, step, &i)) break;
    }
    return Value(std::move(out));
  });
}

}  // namespace tachyon::jinja::internal
