#include "embed/words_embedder.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "embed/fingerprint.h"
#include "embed/text_words.h"

namespace tachyon {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// A short fingerprint of the files an embedder was made from (name, size, time).
std::string FilesFingerprint(const std::vector<std::string>& paths) {
  Fingerprint f;
  for (const std::string& p : paths) {
    struct stat st;
    std::string key = std::filesystem::path(p).filename().string();
    if (::stat(p.c_str(), &st) == 0) key += ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtime);
    f.Add(key);
  }
  return f.Hex();
}

}  // namespace

StatusOr<std::unique_ptr<WordsEmbedder>> WordsEmbedder::Create(const WordsEmbedderOptions& options) {
  if (options.sif_a <= 0) return InvalidArgumentError("the SIF weight parameter a must be positive");
  if (options.remove_components < 0 || options.remove_components > 16) {
    return InvalidArgumentError("remove_components must be 0..16");
  }
  std::unique_ptr<WordsEmbedder> e(new WordsEmbedder());
  RETURN_IF_ERROR(e->LoadVectors(options));
  RETURN_IF_ERROR(e->Fit(options));
  std::vector<std::string> files = {options.vectors_path};
  files.insert(files.end(), options.corpus.begin(), options.corpus.end());
  e->id_ = "words:" + std::filesystem::path(options.vectors_path).filename().string() + "@" +
           FilesFingerprint(files) + ":sif" + std::to_string(options.sif_a) + ":pc" +
           std::to_string(e->components_.size());
  return e;
}

Status WordsEmbedder::LoadVectors(const WordsEmbedderOptions& options) {
  const std::string& path = options.vectors_path;
  auto add_word = [&](std::string word) {
    if (words_.count(word) != 0) return false;  // the first (most frequent) spelling wins
    words_.emplace(std::move(word), static_cast<int32_t>(words_.size()));
    return true;
  };
  auto full = [&] { return options.max_words > 0 && words_.size() >= options.max_words; };
  if (EndsWith(path, ".f32")) {
    std::string words_path = options.words_path;
    if (words_path.empty()) words_path = path.substr(0, path.size() - 4) + ".vocab.txt";
    std::ifstream words(words_path);
    if (!words) return NotFoundError(words_path + ": cannot open the words file of " + path);
    std::vector<std::string> list;
    for (std::string w; std::getline(words, w);) list.push_back(w);
    const uint64_t bytes = FileSize(path);
    if (list.empty() || bytes == 0 || bytes % (4 * list.size()) != 0) {
      return InvalidArgumentError(path + ": " + std::to_string(bytes) + " bytes are not " + std::to_string(list.size()) +
                                  " rows of float32 (one per word of " + words_path + ")");
    }
    dim_ = static_cast<int>(bytes / 4 / list.size());
    std::ifstream in(path, std::ios::binary);
    std::vector<float> all(bytes / 4);
    if (!in.read(reinterpret_cast<char*>(all.data()), static_cast<std::streamsize>(bytes))) {
      return DataLossError(path + ": short read");
    }
    for (size_t i = 0; i < list.size() && !full(); ++i) {
      if (add_word(list[i])) vectors_.insert(vectors_.end(), &all[i * dim_], &all[(i + 1) * dim_]);
    }
  } else if (EndsWith(path, ".bin")) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return NotFoundError(path + ": cannot open");
    long long n = 0, d = 0;
    std::string header;
    std::getline(in, header);
    if (std::sscanf(header.c_str(), "%lld %lld", &n, &d) != 2 || n <= 0 || d <= 0 || d > 100000) {
      return InvalidArgumentError(path + ": the first line is not word2vec's \"N D\"");
    }
    dim_ = static_cast<int>(d);
    std::vector<float> row(dim_);
    for (long long i = 0; i < n && !full(); ++i) {
      std::string word;
      char c;
      while (in.get(c) && c != ' ') {
        if (c != '\n') word += c;
      }
      if (!in.read(reinterpret_cast<char*>(row.data()), dim_ * 4)) {
        return DataLossError(path + ": ends inside vector " + std::to_string(i) + " of " + std::to_string(n));
      }
      if (add_word(word)) vectors_.insert(vectors_.end(), row.begin(), row.end());
    }
  } else {
    std::ifstream in(path);
    if (!in) return NotFoundError(path + ": cannot open");
    std::string line;
    size_t line_number = 0;
    while (std::getline(in, line) && !full()) {
      ++line_number;
      std::istringstream fields(line);
      std::string word;
      fields >> word;
      std::vector<float> row;
      for (float v; fields >> v;) row.push_back(v);
      if (line_number == 1 && row.size() == 1 && word.find_first_not_of("0123456789") == std::string::npos) {
        continue;  // word2vec text's "N D" header
      }
      if (word.empty()) continue;
      if (dim_ == 0) dim_ = static_cast<int>(row.size());
      if (dim_ == 0 || static_cast<int>(row.size()) != dim_) {
        return InvalidArgumentError(path + ":" + std::to_string(line_number) + ": " + std::to_string(row.size()) +
                                    " numbers after the word, expected " + std::to_string(dim_));
      }
      if (add_word(word)) vectors_.insert(vectors_.end(), row.begin(), row.end());
    }
  }
  if (words_.empty() || dim_ == 0) return InvalidArgumentError(path + ": no word vectors");
  return Status::Ok();
}

Status WordsEmbedder::Fit(const WordsEmbedderOptions& options) {
  const size_t n = words_.size();
  std::vector<double> p(n, 0.0);
  std::vector<std::string> sentences;
  if (options.corpus.empty()) {
    // Zipf: p(rank r) = 1 / (r H_n), the file being in frequency order.
    double harmonic = 0;
    for (size_t r = 1; r <= n; ++r) harmonic += 1.0 / static_cast<double>(r);
    for (size_t i = 0; i < n; ++i) p[i] = 1.0 / (static_cast<double>(i + 1) * harmonic);
  } else {
    std::vector<double> counts(n, 1.0);  // a word the corpus lacks counts as seen once
    double total = static_cast<double>(n);
    for (const std::string& file : options.corpus) {
      std::ifstream in(file);
      if (!in) return NotFoundError(file + ": cannot open the corpus");
      for (std::string line; std::getline(in, line);) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        for (const std::string& w : FoldedWords(line)) {
          if (auto it = words_.find(w); it != words_.end()) counts[it->second] += 1, total += 1;
        }
        sentences.push_back(std::move(line));
      }
    }
    for (size_t i = 0; i < n; ++i) p[i] = counts[i] / total;
  }
  weights_.resize(n);
  for (size_t i = 0; i < n; ++i) weights_[i] = static_cast<float>(options.sif_a / (options.sif_a + p[i]));

  // The common components: leading eigenvectors of X^T X over the corpus'
  // averages X (as Arora et al., uncentered), by power iteration with deflation.
  if (sentences.empty() || options.remove_components == 0) return Status::Ok();
  std::vector<float> x(sentences.size() * dim_);
  for (size_t s = 0; s < sentences.size(); ++s) Average(sentences[s], &x[s * dim_]);
  std::vector<double> cov(static_cast<size_t>(dim_) * dim_, 0.0);
  for (size_t s = 0; s < sentences.size(); ++s) {
    const float* v = &x[s * dim_];
    for (int i = 0; i < dim_; ++i) {
      for (int j = 0; j < dim_; ++j) cov[i * dim_ + j] += static_cast<double>(v[i]) * v[j];
    }
  }
  for (int c = 0; c < options.remove_components; ++c) {
    std::vector<double> u(dim_, 1.0 / std::sqrt(static_cast<double>(dim_))), next(dim_);
    double eigenvalue = 0;
    for (int iter = 0; iter < 200; ++iter) {
      for (int i = 0; i < dim_; ++i) {
        double sum = 0;
        for (int j = 0; j < dim_; ++j) sum += cov[i * dim_ + j] * u[j];
        next[i] = sum;
      }
      double norm = 0;
      for (double v : next) norm += v * v;
      norm = std::sqrt(norm);
      if (norm == 0) break;
      double change = 0;
      for (int i = 0; i < dim_; ++i) {
        const double v = next[i] / norm;
        change += std::fabs(v - u[i]);
        u[i] = v;
      }
      eigenvalue = norm;
      if (change < 1e-9) break;
    }
    if (eigenvalue == 0) break;
    components_.emplace_back(u.begin(), u.end());
    for (int i = 0; i < dim_; ++i) {
      for (int j = 0; j < dim_; ++j) cov[i * dim_ + j] -= eigenvalue * u[i] * u[j];
    }
  }
  return Status::Ok();
}

void WordsEmbedder::Average(std::string_view text, float* out) const {
  std::fill(out, out + dim_, 0.0f);
  int count = 0;
  for (const std::string& w : FoldedWords(text)) {
    auto it = words_.find(w);
    if (it == words_.end()) continue;
    const float weight = weights_[it->second];
    const float* v = &vectors_[static_cast<size_t>(it->second) * dim_];
    for (int i = 0; i < dim_; ++i) out[i] += weight * v[i];
    ++count;
  }
  if (count > 0) {
    for (int i = 0; i < dim_; ++i) out[i] /= static_cast<float>(count);
  }
}

void WordsEmbedder::EmbedOne(std::string_view text, float* out) const {
  Average(text, out);
  for (const std::vector<float>& u : components_) {
    const float projection = Dot(out, u.data(), dim_);
    for (int i = 0; i < dim_; ++i) out[i] -= projection * u[i];
  }
  NormalizeRows(out, 1, dim_);
}

StatusOr<std::vector<float>> WordsEmbedder::Embed(std::span<const std::string> texts) {
  std::vector<float> out(texts.size() * dim_);
  for (size_t i = 0; i < texts.size(); ++i) EmbedOne(texts[i], &out[i * dim_]);
  return out;
}

}  // namespace tachyon
