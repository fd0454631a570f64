// The per-key state of a rule whose algorithm is not the token bucket, and the
// algorithm calls over it: the one place that turns a rule's configuration
// (limit, period, burst and AlgorithmOptions) into an algorithm's Params and
// dispatches evaluate/commit/charge_remote/is_idle to the right algorithm.
// A state lives in one of two places: a StateCell in the KeyTable's packed
// slots when it is small and plain (in_cell()), else a RuleState in the
// StateTable (the sliding log and concurrency own memory). The token bucket
// itself is handled by the Limiter directly. Pure; not thread-safe.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "core/algorithms/algorithm.h"
#include "core/algorithms/concurrency.h"
#include "core/algorithms/fixed_window.h"
#include "core/algorithms/gcra.h"
#include "core/algorithms/leaky_bucket.h"
#include "core/algorithms/sliding_log.h"
#include "core/algorithms/sliding_window.h"
#include "core/algorithms/smooth_bursty.h"
#include "core/algorithms/smooth_warming_up.h"
#include "core/rule.h"
#include "core/state_cell.h"

namespace rlimit::core {

namespace alg = algorithms;

// One alternative per Algorithm, in its order (index == Algorithm).
using AlgorithmParams =
    std::variant<BucketParams, alg::LeakyBucket::Params, alg::FixedWindow::Params,
                 alg::SlidingWindow::Params, alg::SlidingLog::Params, alg::Gcra::Params,
                 alg::SmoothBursty::Params, alg::SmoothWarmingUp::Params,
                 alg::Concurrency::Params>;

// The state of one key of any algorithm but the token bucket.
using RuleState =
    std::variant<alg::LeakyBucket::State, alg::FixedWindow::State, alg::SlidingWindow::State,
                 alg::SlidingLog::State, alg::Gcra::State, alg::SmoothState,
                 alg::Concurrency::State>;

inline Algorithm algorithm_of(const AlgorithmParams& params) {
  return static_cast<Algorithm>(params.index());
}

// The algorithm's parameters for a rule (or override) with `bucket` = limit,
// period and burst, and `options`. How the common three map:
//   token_bucket      limit per period, burst = capacity
//   leaky_bucket      drains limit per period, burst = capacity
//   fixed_window,     limit per window of period (burst unused)
//   sliding_window
//   sliding_log       limit per rolling period; max_entries (0: min(limit, 65536))
//   gcra              count = limit per period, max_burst = burst - 1
//   smooth_bursty     permits = limit per period, stores up to burst permits
//   smooth_warming_up permits = limit per period, warmup, cold_factor
//   concurrency       max_in_flight = limit, lease_ttl (period unused)
// Sets `*error` and returns nullopt when they are not usable.
std::optional<AlgorithmParams> make_algorithm_params(Algorithm algorithm,
                                                     const BucketParams& bucket,
                                                     const AlgorithmOptions& options,
                                                     std::string* error);

// Returns `params` with the longest wait replaced by `max_wait_us` for the
// algorithms that hand out waits (leaky shaper, smooth_*): a request's own
// maximum wait. Others are returned unchanged.
AlgorithmParams with_max_wait(const AlgorithmParams& params, std::int64_t max_wait_us);
// True for the algorithms whose verdicts carry waits on their own.
bool hands_out_waits(const AlgorithmParams& params);

alg::Replication replication_of(const AlgorithmParams& params);

// True when the algorithm's state fits a StateCell (the token bucket, the
// leaky bucket, both windows, GCRA, the smooth limiters).
bool in_cell(const AlgorithmParams& params);

// The calls of algorithm.h on a state kept in a StateCell; `params` must be
// in_cell() and not the token bucket's.
StateCell fresh_cell(const AlgorithmParams& params, TimeUs now);
alg::Verdict evaluate_cell(const StateCell& cell, const AlgorithmParams& params, std::int64_t cost,
                           TimeUs now);
alg::Ticket commit_cell(StateCell& cell, const AlgorithmParams& params, std::int64_t cost,
                        TimeUs now);
// Remote consumption that happened at `at`, learned at `now` (>= at): an
// algorithm that takes both (the sliding log) gets both, the others `at`.
void charge_remote_cell(StateCell& cell, const AlgorithmParams& params, std::int64_t amount,
                        TimeUs at, TimeUs now);
bool cell_is_idle(const StateCell& cell, const AlgorithmParams& params, TimeUs now);
// Who refused a request at `now` (algorithm.h: the optional
// note_share_refusal and note_refusal, where the algorithm has them): this
// node's fair share, where the algorithm had room for it, or the algorithm.
enum class Refusal { kByShare, kByAlgorithm };
void note_refusal_cell(StateCell& cell, const AlgorithmParams& params, Refusal by, TimeUs now);

// The calls of algorithm.h on a state kept in the StateTable. `params` must not hold BucketParams,
// and `state` must be the one made by fresh() with the same params.
RuleState fresh_state(const AlgorithmParams& params, TimeUs now);
alg::Verdict evaluate_state(const RuleState& state, const AlgorithmParams& params,
                            std::int64_t cost, TimeUs now);
alg::Ticket commit_state(RuleState& state, const AlgorithmParams& params, std::int64_t cost,
                         TimeUs now);
void charge_remote_state(RuleState& state, const AlgorithmParams& params, std::int64_t amount,
                         TimeUs at, TimeUs now);
bool state_is_idle(const RuleState& state, const AlgorithmParams& params, TimeUs now);
void note_refusal_state(RuleState& state, const AlgorithmParams& params, Refusal by, TimeUs now);
// The units the algorithm holds back at `now` to repay an overshoot it
// carries (a sliding log's held_units); 0 for an algorithm that carries none.
std::int64_t held_state(const RuleState& state, const AlgorithmParams& params, TimeUs now);

}  // namespace rlimit::core
