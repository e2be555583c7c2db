// The words of a text for the model-free embedders: case-folded, accents
// stripped (NFKD, nonspacing marks dropped), split at every character that is
// not a letter or a digit. An apostrophe inside a word is kept with what
// follows it as its own word ("don't" -> "don", "'t"), close to how GloVe's
// corpus was tokenized.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tachyon {

std::vector<std::string> FoldedWords(std::string_view text);

}  // namespace tachyon
