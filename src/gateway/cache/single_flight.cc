#include "gateway/cache/single_flight.h"

#include <algorithm>

namespace tachyon {

void Flight::Text(const std::string& piece) {
  if (piece.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_ || failed_) return;
  text_ += piece;
  for (const auto& f : followers_) f->OnText(piece);
}

void Flight::End(const CapturedAnswer& answer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_ || failed_) return;
  ended_ = true;
  answer_ = answer;
  // A whole answer gives its text only now; a streamed one gave it piece by piece.
  if (answer.text.size() > text_.size() && answer.text.compare(0, text_.size(), text_) == 0) {
    const std::string rest = answer.text.substr(text_.size());
    text_ = answer.text;
    for (const auto& f : followers_) f->OnText(rest);
  }
  answer_.text = text_;
  for (const auto& f : followers_) f->OnEnd(answer_);
  followers_.clear();
}

void Flight::Fail(FailKind kind) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_ || failed_) return;
  failed_ = true;
  if (kind != FailKind::kAlone && !text_.empty()) kind = FailKind::kBroken;
  for (const auto& f : followers_) f->OnFail(kind);
  followers_.clear();
}

bool Flight::texted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !text_.empty();
}

void Flight::Leave(const Follower* follower) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::erase_if(followers_, [&](const std::shared_ptr<Follower>& f) { return f.get() == follower; });
}

size_t Flight::num_followers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return followers_.size();
}

bool Flight::Follow(const std::shared_ptr<Follower>& f) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_ || failed_) return false;
  if (!text_.empty()) f->OnText(text_);
  followers_.push_back(f);
  return true;
}

SingleFlight::Joined SingleFlight::Join(const std::string& key, const std::shared_ptr<Flight::Follower>& follower) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = flights_.find(key);
  if (it != flights_.end() && it->second->Follow(follower)) return Joined{it->second, false};
  auto flight = std::make_shared<Flight>();
  flights_[key] = flight;
  return Joined{std::move(flight), true};
}

void SingleFlight::Land(const std::string& key, const std::shared_ptr<Flight>& flight) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = flights_.find(key);
  if (it != flights_.end() && it->second == flight) flights_.erase(it);  // else a new flight of the key took its place
}

size_t SingleFlight::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return flights_.size();
}

}  // namespace tachyon
