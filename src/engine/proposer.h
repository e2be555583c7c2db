// Proposer: guesses the tokens that follow a sequence, for speculative
// decoding. The engine verifies every guess with the target model in the same
// forward pass as the other sequences' decode tokens, so a proposer changes
// speed only, never the output.
//
// One call per step covers every speculating sequence, so a proposer that
// runs a model (a draft model) can batch them.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "base/strong_id.h"
#include "base/thread_pool.h"

namespace tachyon {

class Proposer {
 public:
  struct Query {
    SeqId id;
    std::span<const TokenId> tokens;  // the sequence so far: prompt, then generated
    int max_tokens = 0;               // propose at most this many (>= 1)
    std::vector<TokenId>* draft = nullptr;  // out: the proposal (empty: none)
  };
  virtual ~Proposer() = default;
  // pool: the engine's threads (idle while proposals are made).
  virtual void Propose(std::span<const Query> queries, ThreadPool& pool) = 0;
  // The sequence is gone: drop whatever is kept for it.
  virtual void Forget(SeqId) {}
  // Whether proposing costs real time (a model runs), so that a proposer that
  // keeps failing should pause longer and longer (SpeculationControl).
  virtual bool costly() const { return true; }
};

// Prompt lookup: the longest suffix of the last n tokens (n from max_n down to
// min_n) that occurred earlier in the sequence, most recent occurrence first,
// and the tokens that followed it (a loop continued past the end: after
// "a b c a b c a b" it proposes "c a b c"). Free to compute; pays on text that
// quotes or repeats itself (code edits, extraction, loops).
class NgramProposer : public Proposer {
 public:
  NgramProposer(int min_n, int max_n);
  void Propose(std::span<const Query> queries, ThreadPool& pool) override;
  bool costly() const override { return false; }
  // One sequence's proposal (appended to *draft).
  void ProposeOne(std::span<const TokenId> tokens, int max_tokens, std::vector<TokenId>* draft) const;

 private:
  int min_n_;
  int max_n_;
};

}  // namespace tachyon
