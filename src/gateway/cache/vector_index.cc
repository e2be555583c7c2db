#include "gateway/cache/vector_index.h"

#include <hnswlib/hnswlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "embed/embedder.h"
#include "gateway/cache/int8_dot.h"
#include "kernels/cpu_features.h"

namespace tachyon {

int32_t Int8DotRef(const int8_t* a, const int8_t* b, int n) {
  int32_t sum = 0;
  for (int i = 0; i < n; ++i) sum += static_cast<int32_t>(a[i]) * b[i];
  return sum;
}

namespace {

constexpr size_t kM = 16;
constexpr size_t kEfConstruction = 64;
constexpr size_t kEfSearch = 64;

// Graph nodes: [float scale][int8 x dim], x ~= scale * q. hnswlib's own
// spaces hold floats and vectorize only for the instruction set this file is
// built for; this one reads a quarter of the bytes and picks AVX2 at run time.
class Int8CosineSpace : public hnswlib::SpaceInterface<float> {
 public:
  explicit Int8CosineSpace(size_t dim) : dim_(dim) {}
  size_t get_data_size() override { return sizeof(float) + dim_; }
  hnswlib::DISTFUNC<float> get_dist_func() override { return CpuHasAvx2() ? &DistanceAvx2 : &DistanceRef; }
  void* get_dist_func_param() override { return &dim_; }

 private:
  template <int32_t (*kDot)(const int8_t*, const int8_t*, int)>
  static float Distance(const void* a, const void* b, const void* dim) {
    float sa, sb;
    std::memcpy(&sa, a, sizeof(float));
    std::memcpy(&sb, b, sizeof(float));
    const int32_t dot = kDot(static_cast<const int8_t*>(a) + sizeof(float), static_cast<const int8_t*>(b) + sizeof(float),
                             static_cast<int>(*static_cast<const size_t*>(dim)));
    return 1.0f - sa * sb * static_cast<float>(dot);
  }
  static float DistanceRef(const void* a, const void* b, const void* dim) { return Distance<Int8DotRef>(a, b, dim); }
  static float DistanceAvx2(const void* a, const void* b, const void* dim) { return Distance<Int8DotAvx2>(a, b, dim); }
  size_t dim_;
};

// A float vector in the graph's form.
std::vector<char> Quantize(const float* v, int dim) {
  float largest = 0;
  for (int i = 0; i < dim; ++i) largest = std::max(largest, std::fabs(v[i]));
  const float scale = largest > 0 ? largest / 127.0f : 1.0f;
  std::vector<char> out(sizeof(float) + static_cast<size_t>(dim));
  std::memcpy(out.data(), &scale, sizeof(float));
  for (int i = 0; i < dim; ++i) {
    out[sizeof(float) + static_cast<size_t>(i)] =
        static_cast<char>(static_cast<int8_t>(std::lround(std::clamp(v[i] / scale, -127.0f, 127.0f))));
  }
  return out;
}

}  // namespace

struct VectorIndex::Partition {
  // Flat: rows[i] belongs to ids[i].
  std::vector<uint64_t> ids;
  std::vector<float> rows;
  std::unordered_map<uint64_t, size_t> row_of;
  // Graph: labels are the ids.
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> graph;
  size_t live = 0, deleted = 0;
  std::unordered_map<uint64_t, bool> in_graph;  // id -> live (false: marked deleted)
};

VectorIndex::VectorIndex(int dimension)
    : dimension_(dimension), space_(std::make_unique<Int8CosineSpace>(static_cast<size_t>(dimension))) {}

VectorIndex::~VectorIndex() = default;

void VectorIndex::MakeGraph(Partition& p, size_t capacity) const {
  p.graph = std::make_unique<hnswlib::HierarchicalNSW<float>>(space_.get(), capacity, kM, kEfConstruction);
  p.graph->setEf(kEfSearch);
}

void VectorIndex::Add(const std::string& scope, uint64_t id, const float* vector) {
  std::unique_ptr<Partition>& slot = partitions_[scope];
  if (!slot) slot = std::make_unique<Partition>();
  Partition& p = *slot;
  const size_t dim = static_cast<size_t>(dimension_);
  if (!p.graph) {
    if (auto it = p.row_of.find(id); it != p.row_of.end()) {
      std::copy(vector, vector + dim, p.rows.begin() + static_cast<ptrdiff_t>(it->second * dim));
      return;
    }
    if (p.ids.size() < kFlatLimit) {
      p.row_of[id] = p.ids.size();
      p.ids.push_back(id);
      p.rows.insert(p.rows.end(), vector, vector + dim);
      ++size_;
      return;
    }
    // The flat rows move into a graph.
    MakeGraph(p, 4 * kFlatLimit);
    for (size_t i = 0; i < p.ids.size(); ++i) {
      p.graph->addPoint(Quantize(&p.rows[i * dim], dimension_).data(), p.ids[i]);
      p.in_graph[p.ids[i]] = true;
    }
    p.live = p.ids.size();
    p.ids.clear();
    p.rows.clear();
    p.row_of.clear();
  }
  auto it = p.in_graph.find(id);
  if (it != p.in_graph.end()) {
    if (!it->second) {  // re-added after removal: the node comes back
      p.graph->unmarkDelete(id);
      it->second = true;
      --p.deleted;
      ++p.live;
      ++size_;
    }
    p.graph->addPoint(Quantize(vector, dimension_).data(), id);  // an existing label: its vector is updated
    return;
  }
  if (p.graph->cur_element_count >= p.graph->max_elements_) {
    p.graph->resizeIndex(2 * p.graph->max_elements_);
  }
  p.graph->addPoint(Quantize(vector, dimension_).data(), id);
  p.in_graph[id] = true;
  ++p.live;
  ++size_;
}

void VectorIndex::Remove(const std::string& scope, uint64_t id) {
  auto found = partitions_.find(scope);
  if (found == partitions_.end()) return;
  Partition& p = *found->second;
  const size_t dim = static_cast<size_t>(dimension_);
  if (!p.graph) {
    auto it = p.row_of.find(id);
    if (it == p.row_of.end()) return;
    const size_t row = it->second, last = p.ids.size() - 1;
    if (row != last) {
      std::copy(p.rows.begin() + static_cast<ptrdiff_t>(last * dim), p.rows.begin() + static_cast<ptrdiff_t>((last + 1) * dim),
                p.rows.begin() + static_cast<ptrdiff_t>(row * dim));
      p.ids[row] = p.ids[last];
      p.row_of[p.ids[row]] = row;
    }
    p.ids.pop_back();
    p.rows.resize(p.ids.size() * dim);
    p.row_of.erase(it);
    --size_;
    if (p.ids.empty()) partitions_.erase(found);
    return;
  }
  auto it = p.in_graph.find(id);
  if (it == p.in_graph.end() || !it->second) return;
  p.graph->markDelete(id);
  it->second = false;
  --p.live;
  ++p.deleted;
  --size_;
  if (p.live == 0) {
    partitions_.erase(found);
    return;
  }
  if (p.deleted > p.live && p.deleted > kFlatLimit) {
    // Rebuild from the live vectors: marked nodes still cost memory and search time.
    std::vector<std::pair<uint64_t, std::vector<char>>> live;
    live.reserve(p.live);
    for (const auto& [label, alive] : p.in_graph) {
      if (!alive) continue;
      // The node's bytes as stored (hnswlib 0.6.2's getDataByLabel copies dim elements, not the node).
      const char* node = p.graph->getDataByInternalId(p.graph->label_lookup_.at(label));
      live.emplace_back(label, std::vector<char>(node, node + space_->get_data_size()));
    }
    MakeGraph(p, std::max(2 * live.size(), 4 * kFlatLimit));
    p.in_graph.clear();
    for (const auto& [label, v] : live) {
      p.graph->addPoint(v.data(), label);
      p.in_graph[label] = true;
    }
    p.deleted = 0;
  }
}

std::vector<std::pair<uint64_t, float>> VectorIndex::Search(const std::string& scope, const float* query,
                                                            size_t k) const {
  std::vector<std::pair<uint64_t, float>> out;
  auto found = partitions_.find(scope);
  if (found == partitions_.end() || k == 0) return out;
  const Partition& p = *found->second;
  if (!p.graph) {
    const size_t dim = static_cast<size_t>(dimension_);
    out.reserve(p.ids.size());
    for (size_t i = 0; i < p.ids.size(); ++i) out.emplace_back(p.ids[i], Dot(query, &p.rows[i * dim], dimension_));
    const size_t keep = std::min(k, out.size());
    std::partial_sort(out.begin(), out.begin() + static_cast<ptrdiff_t>(keep), out.end(),
                      [](const auto& a, const auto& b) { return a.second > b.second; });
    out.resize(keep);
    return out;
  }
  auto top = p.graph->searchKnn(Quantize(query, dimension_).data(), k);  // farthest first; distance = 1 - dot
  out.resize(top.size());
  for (size_t i = top.size(); i-- > 0;) {
    out[i] = {top.top().second, 1.0f - top.top().first};
    top.pop();
  }
  return out;
}

size_t VectorIndex::graph_entries() const {
  size_t n = 0;
  for (const auto& [scope, p] : partitions_) {
    if (p->graph) n += p->live;
  }
  return n;
}

}  // namespace tachyon
