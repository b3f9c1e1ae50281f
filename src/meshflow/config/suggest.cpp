// "Did you mean" for config keys: the valid key closest to a mistyped one, by edit distance on
// the whole dotted key and on its last segment (so `train_iter` or `optim.train_iter` still
// finds `train.train_iter`, and `model.hiden` finds `model.hidden_size`). Ties go to the
// smaller whole-key distance, then document order.
#include <algorithm>
#include <string_view>

#include "meshflow/config/config.h"

namespace mf::config_detail {

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  thread_local std::vector<size_t> row;  // one row of the table, reused: called for every valid key
  row.resize(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      const size_t step = std::min(up, row[j - 1]) + 1, change = diag + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = step < change ? step : change;
      diag = up;
    }
  }
  return row[b.size()];
}

std::string_view last_segment(std::string_view key) {
  size_t dot = key.rfind('.');
  return dot == std::string_view::npos ? key : key.substr(dot + 1);
}

}  // namespace

std::string suggest_key(const std::string& key) {
  std::string_view last = last_segment(key);
  // Both distances are at least the length difference, and only a third of `last` may be wrong:
  // a key this much longer than every valid one has no suggestion, and is not compared (the
  // comparisons cost its length times every key's, seconds for a pasted paragraph).
  static const size_t longest = [] {
    size_t n = 0;
    for (const SchemaEntry& e : schema()) n = std::max(n, e.key.size());
    return n;
  }();
  if (last.size() > 2 * longest + 6) return std::string();
  // Only suggest what is plausibly a typo: at most a third of the segment's letters wrong.
  const size_t limit = std::max<size_t>(2, last.size() / 3);
  const auto gap = [](size_t a, size_t b) { return a > b ? a - b : b - a; };
  const SchemaEntry* best = nullptr;
  size_t best_score = 0, best_full = 0;
  for (const SchemaEntry& e : schema()) {
    std::string_view cand = last_segment(e.key);
    // A lower bound of the score (a distance is at least the length difference): a key that
    // cannot come within the limit is never suggested nor beats one that does, so it is skipped.
    size_t bound = std::min(gap(key.size(), e.key.size()), gap(last.size(), cand.size()));
    for (size_t u = cand.find('_'); u != std::string_view::npos; u = cand.find('_', u + 1))
      bound = std::min(bound, gap(last.size(), u) + 1);
    if (bound > limit) continue;
    size_t full = edit_distance(key, e.key);
    size_t seg = edit_distance(last, cand);
    // A word-prefix of the candidate ("hidden" of "hidden_size") costs one more than a typo.
    for (size_t u = cand.find('_'); u != std::string_view::npos; u = cand.find('_', u + 1))
      seg = std::min(seg, edit_distance(last, cand.substr(0, u)) + 1);
    size_t score = std::min(full, seg);
    if (!best || score < best_score || (score == best_score && full < best_full)) {
      best = &e;
      best_score = score;
      best_full = full;
    }
  }
  return best && best_score <= limit ? best->key : std::string();
}

std::string did_you_mean(const std::string& key) {
  std::string s = suggest_key(key);
  return s.empty() ? std::string() : "; did you mean `" + s + "`?";
}

}  // namespace mf::config_detail
