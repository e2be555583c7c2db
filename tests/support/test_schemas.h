// JSON Schemas that constrained-decoding tests sample answers under: every
// keyword the grammar compiler takes, alone and nested.
#pragma once

#include <string>
#include <vector>

namespace tachyon::testing {

inline const std::vector<std::string>& TestSchemas() {
  static const std::vector<std::string> schemas = {
      // A typical extraction record.
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":130},
          "email":{"type":"string","maxLength":20},"tags":{"type":"array","items":{"type":"string","maxLength":6},"maxItems":3}},
          "required":["name","age"],"additionalProperties":false})",
      // enum, const, booleans, null, numbers, type arrays.
      R"({"type":"object","properties":{"color":{"enum":["red","green","blue",7,null]},"kind":{"const":"point"},
          "ok":{"type":"boolean"},"x":{"type":"number"},"note":{"type":["string","null"],"maxLength":5}},
          "required":["color","kind","ok","x","note"]})",
      // anyOf, $ref to $defs, recursion, minItems.
      R"({"$defs":{"leaf":{"type":"object","properties":{"v":{"type":"integer","minimum":-5,"maximum":5}},"required":["v"]},
          "tree":{"type":"object","properties":{"kids":{"type":"array","items":{"anyOf":[{"$ref":"#/$defs/leaf"},{"$ref":"#/$defs/tree"}]},
          "minItems":1,"maxItems":2}},"required":["kids"]}},
          "anyOf":[{"$ref":"#/$defs/leaf"},{"$ref":"#/$defs/tree"}]})",
      // String formats and lengths, exclusive bounds, a top-level array.
      R"({"type":"array","minItems":1,"maxItems":4,"items":{"type":"object","properties":{
          "id":{"type":"string","format":"uuid"},"day":{"type":"string","format":"date"},"at":{"type":"string","format":"date-time"},
          "code":{"type":"string","minLength":2,"maxLength":4},"n":{"type":"integer","exclusiveMinimum":10,"exclusiveMaximum":1000}},
          "required":["id","day","at","code","n"],"additionalProperties":false}})",
      // A map with typed values, and an object that takes anything.
      R"({"type":"object","properties":{"scores":{"type":"object","additionalProperties":{"type":"integer","minimum":1,"maximum":9}},
          "extra":{"type":"object"}},"required":["scores"]})",
  };
  return schemas;
}

}  // namespace tachyon::testing
