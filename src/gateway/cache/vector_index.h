// VectorIndex: the semantic cache's nearest-neighbour search over unit vectors
// of one embedder, by cosine, within a scope. Entries of different scopes are
// never compared: each scope is a partition of its own. A scope holds its
// first kFlatLimit vectors in a flat array searched exactly (256 rows of 1,024
// floats, the hash embedder's, in about 50 microseconds); past that, an HNSW
// graph (hnswlib: M 16, ef_construction 64, ef 64 at search) that grows as it
// fills. Debian's hnswlib (0.6.2) has no search filter, hence the partitions:
// a filtered search over one shared graph would also be slower for the small
// scopes that most tenants and system prompts make. Graph nodes hold int8
// vectors with one scale (gateway/int8_dot.h): the cosines a graph search
// returns are approximate (within about 0.01); the semantic cache recomputes
// them from its float vectors before deciding.
//
// Removal: a flat row is swapped out; a graph node is marked deleted and its
// partition rebuilt once deleted nodes outnumber live ones. Not thread-safe:
// the semantic cache serializes calls.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hnswlib {
template <typename T>
class HierarchicalNSW;
template <typename T>
class SpaceInterface;
}  // namespace hnswlib

namespace tachyon {

class VectorIndex {
 public:
  static constexpr size_t kFlatLimit = 256;

  explicit VectorIndex(int dimension);
  ~VectorIndex();
  VectorIndex(const VectorIndex&) = delete;
  VectorIndex& operator=(const VectorIndex&) = delete;

  int dimension() const { return dimension_; }
  // Adds (or replaces) the vector of `id` in `scope`. ids are unique across scopes.
  void Add(const std::string& scope, uint64_t id, const float* vector);
  void Remove(const std::string& scope, uint64_t id);
  // The k nearest live entries of the scope: (id, cosine), most similar first.
  std::vector<std::pair<uint64_t, float>> Search(const std::string& scope, const float* query, size_t k) const;
  size_t size() const { return size_; }
  size_t scopes() const { return partitions_.size(); }
  // Entries held in HNSW graphs (the rest are in flat partitions).
  size_t graph_entries() const;

 private:
  struct Partition;
  void MakeGraph(Partition& p, size_t capacity) const;

  const int dimension_;
  std::unique_ptr<hnswlib::SpaceInterface<float>> space_;  // int8 nodes, 1 - dot
  std::unordered_map<std::string, std::unique_ptr<Partition>> partitions_;
  size_t size_ = 0;
};

}  // namespace tachyon
