#include "core/rule_state.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <type_traits>

namespace rlimit::core {
namespace {

// The algorithm a Params type belongs to.
template <class P>
struct AlgorithmOf;
template <>
struct AlgorithmOf<alg::LeakyBucket::Params> {
  using type = alg::LeakyBucket;
};
template <>
struct AlgorithmOf<alg::FixedWindow::Params> {
  using type = alg::FixedWindow;
};
template <>
struct AlgorithmOf<alg::SlidingWindow::Params> {
  using type = alg::SlidingWindow;
};
template <>
struct AlgorithmOf<alg::SlidingLog::Params> {
  using type = alg::SlidingLog;
};
template <>
struct AlgorithmOf<alg::Gcra::Params> {
  using type = alg::Gcra;
};
template <>
struct AlgorithmOf<alg::SmoothBursty::Params> {
  using type = alg::SmoothBursty;
};
template <>
struct AlgorithmOf<alg::SmoothWarmingUp::Params> {
  using type = alg::SmoothWarmingUp;
};
template <>
struct AlgorithmOf<alg::Concurrency::Params> {
  using type = alg::Concurrency;
};

// Returns f.template operator()<A>(params) with A the algorithm of `params`.
template <class R, class F>
R visit_algorithm(const AlgorithmParams& params, F&& f) {
  return std::visit(
      [&](const auto& p) -> R {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, BucketParams>) {
          assert(false && "token buckets live in the key table, not here");
          std::abort();
        } else {
          return f.template operator()<typename AlgorithmOf<P>::type>(p);
        }
      },
      params);
}

}  // namespace

std::optional<AlgorithmParams> make_algorithm_params(Algorithm algorithm,
                                                     const BucketParams& bucket,
                                                     const AlgorithmOptions& options,
                                                     std::string* error) {
  std::optional<AlgorithmParams> params;
  const char* why = nullptr;
  switch (algorithm) {
    case Algorithm::kTokenBucket:
      why = validate(bucket);
      params = bucket;
      break;
    case Algorithm::kLeakyBucket: {
      const alg::LeakyBucket::Params p{
          .limit = bucket.limit,
          .period_us = bucket.period_us,
          .capacity = bucket.burst,
          .mode = options.shaper ? alg::LeakyBucket::Mode::kShaper : alg::LeakyBucket::Mode::kMeter,
          .max_delay_us = options.max_delay_us};
      why = alg::LeakyBucket::validate(p);
      params = p;
      break;
    }
    case Algorithm::kFixedWindow: {
      const alg::FixedWindow::Params p{.limit = bucket.limit, .period_us = bucket.period_us};
      why = alg::FixedWindow::validate(p);
      params = p;
      break;
    }
    case Algorithm::kSlidingWindow: {
      const alg::SlidingWindow::Params p{.limit = bucket.limit, .period_us = bucket.period_us};
      why = alg::SlidingWindow::validate(p);
      params = p;
      break;
    }
    case Algorithm::kSlidingLog: {
      const std::int64_t entries =
          options.max_entries > 0
              ? options.max_entries
              : std::min<std::int64_t>(bucket.limit, alg::SlidingLog::kMaxEntriesBound);
      const alg::SlidingLog::Params p{
          .limit = bucket.limit, .period_us = bucket.period_us, .max_entries = entries};
      why = alg::SlidingLog::validate(p);
      params = p;
      break;
    }
    case Algorithm::kGcra: {
      if (bucket.burst < 1) {
        why = "gcra needs burst >= 1 (burst is max_burst + 1)";
        break;
      }
      const alg::Gcra::Params p{
          .max_burst = bucket.burst - 1, .count = bucket.limit, .period_us = bucket.period_us};
      why = alg::Gcra::validate(p);
      params = p;
      break;
    }
    case Algorithm::kSmoothBursty: {
      if (bucket.limit < 1) {
        why = "smooth_bursty needs limit >= 1";
        break;
      }
      // Stores up to `burst` permits: that many permits' worth of time.
      const __int128 burst_us =
          static_cast<__int128>(bucket.burst) * bucket.period_us / bucket.limit;
      if (burst_us > alg::kMaxToleranceUs) {
        why = "smooth_bursty: burst * period / limit is too long (above 2^60 us)";
        break;
      }
      const alg::SmoothBursty::Params p{.permits = bucket.limit,
                                        .period_us = bucket.period_us,
                                        .max_burst_us = static_cast<std::int64_t>(burst_us),
                                        .max_wait_us = options.max_delay_us,
                                        .start_empty = options.start_empty};
      why = alg::SmoothBursty::validate(p);
      params = p;
      break;
    }
    case Algorithm::kSmoothWarmingUp: {
      const alg::SmoothWarmingUp::Params p{.permits = bucket.limit,
                                           .period_us = bucket.period_us,
                                           .warmup_us = options.warmup_us,
                                           .cold_factor = options.cold_factor,
                                           .max_wait_us = options.max_delay_us};
      why = alg::SmoothWarmingUp::validate(p);
      params = p;
      break;
    }
    case Algorithm::kConcurrency: {
      const alg::Concurrency::Params p{.max_in_flight = bucket.limit,
                                       .lease_ttl_us = options.lease_ttl_us};
      why = alg::Concurrency::validate(p);
      params = p;
      break;
    }
  }
  if (why == nullptr) why = alg::validate(options.throttle);
  if (why != nullptr) {
    if (error != nullptr) *error = why;
    return std::nullopt;
  }
  return params;
}

AlgorithmParams with_max_wait(const AlgorithmParams& params, std::int64_t max_wait_us) {
  AlgorithmParams copy = params;
  if (auto* leaky = std::get_if<alg::LeakyBucket::Params>(&copy)) {
    if (leaky->mode == alg::LeakyBucket::Mode::kShaper) leaky->max_delay_us = max_wait_us;
  } else if (auto* bursty = std::get_if<alg::SmoothBursty::Params>(&copy)) {
    bursty->max_wait_us = max_wait_us;
  } else if (auto* warming = std::get_if<alg::SmoothWarmingUp::Params>(&copy)) {
    warming->max_wait_us = max_wait_us;
  }
  return copy;
}

bool hands_out_waits(const AlgorithmParams& params) {
  if (const auto* leaky = std::get_if<alg::LeakyBucket::Params>(&params)) {
    return leaky->mode == alg::LeakyBucket::Mode::kShaper;
  }
  return std::holds_alternative<alg::SmoothBursty::Params>(params) ||
         std::holds_alternative<alg::SmoothWarmingUp::Params>(params);
}

alg::Replication replication_of(const AlgorithmParams& params) {
  if (std::holds_alternative<BucketParams>(params)) return alg::Replication::kExact;
  return visit_algorithm<alg::Replication>(params, []<class A>(const typename A::Params& p) {
    return A::replication(p);
  });
}

bool in_cell(const AlgorithmParams& params) {
  if (std::holds_alternative<BucketParams>(params)) return true;
  return visit_algorithm<bool>(params, []<class A>(const typename A::Params&) {
    return StateCell::kFits<typename A::State>;
  });
}

namespace {

// f(state) on the cell as the algorithm's state, for algorithms that fit.
template <class R, class F>
R on_cell(const AlgorithmParams& params, F&& f) {
  return visit_algorithm<R>(params, [&]<class A>(const typename A::Params& p) -> R {
    if constexpr (StateCell::kFits<typename A::State>) {
      return f.template operator()<A>(p);
    } else {
      assert(false && "this algorithm's state lives in the StateTable");
      std::abort();
    }
  });
}

// Remote consumption at `at`, learned at `now`: an algorithm that takes both
// (the sliding log) gets both, the others `at`.
template <class A>
void charge_remote_of(typename A::State& state, const typename A::Params& p, std::int64_t amount,
                      TimeUs at, TimeUs now) {
  if constexpr (requires { A::charge_remote(state, p, amount, at, now); }) {
    A::charge_remote(state, p, amount, at, now);
  } else {
    A::charge_remote(state, p, amount, at);
  }
}

// A refusal, told to an algorithm that takes it (algorithm.h).
template <class A>
void note_refusal_of(typename A::State& state, const typename A::Params& p, Refusal by,
                     TimeUs now) {
  if (by == Refusal::kByShare) {
    if constexpr (requires { A::note_share_refusal(state, p, now); }) {
      A::note_share_refusal(state, p, now);
    }
  } else if constexpr (requires { A::note_refusal(state, p, now); }) {
    A::note_refusal(state, p, now);
  }
}

}  // namespace

StateCell fresh_cell(const AlgorithmParams& params, TimeUs now) {
  return on_cell<StateCell>(params, [&]<class A>(const typename A::Params& p) {
    return StateCell::of(A::fresh(p, now));
  });
}

alg::Verdict evaluate_cell(const StateCell& cell, const AlgorithmParams& params, std::int64_t cost,
                           TimeUs now) {
  return on_cell<alg::Verdict>(params, [&]<class A>(const typename A::Params& p) {
    return A::evaluate(cell.as<typename A::State>(), p, cost, now);
  });
}

alg::Ticket commit_cell(StateCell& cell, const AlgorithmParams& params, std::int64_t cost,
                        TimeUs now) {
  return on_cell<alg::Ticket>(params, [&]<class A>(const typename A::Params& p) {
    return A::commit(cell.as<typename A::State>(), p, cost, now);
  });
}

void charge_remote_cell(StateCell& cell, const AlgorithmParams& params, std::int64_t amount,
                        TimeUs at, TimeUs now) {
  on_cell<void>(params, [&]<class A>(const typename A::Params& p) {
    charge_remote_of<A>(cell.as<typename A::State>(), p, amount, at, now);
  });
}

bool cell_is_idle(const StateCell& cell, const AlgorithmParams& params, TimeUs now) {
  return on_cell<bool>(params, [&]<class A>(const typename A::Params& p) {
    return A::is_idle(cell.as<typename A::State>(), p, now);
  });
}

void note_refusal_cell(StateCell& cell, const AlgorithmParams& params, Refusal by, TimeUs now) {
  on_cell<void>(params, [&]<class A>(const typename A::Params& p) {
    note_refusal_of<A>(cell.as<typename A::State>(), p, by, now);
  });
}

RuleState fresh_state(const AlgorithmParams& params, TimeUs now) {
  return visit_algorithm<RuleState>(params, [&]<class A>(const typename A::Params& p) {
    return RuleState(A::fresh(p, now));
  });
}

alg::Verdict evaluate_state(const RuleState& state, const AlgorithmParams& params,
                            std::int64_t cost, TimeUs now) {
  return visit_algorithm<alg::Verdict>(params, [&]<class A>(const typename A::Params& p) {
    return A::evaluate(std::get<typename A::State>(state), p, cost, now);
  });
}

alg::Ticket commit_state(RuleState& state, const AlgorithmParams& params, std::int64_t cost,
                         TimeUs now) {
  return visit_algorithm<alg::Ticket>(params, [&]<class A>(const typename A::Params& p) {
    return A::commit(std::get<typename A::State>(state), p, cost, now);
  });
}

void charge_remote_state(RuleState& state, const AlgorithmParams& params, std::int64_t amount,
                         TimeUs at, TimeUs now) {
  visit_algorithm<void>(params, [&]<class A>(const typename A::Params& p) {
    charge_remote_of<A>(std::get<typename A::State>(state), p, amount, at, now);
  });
}

bool state_is_idle(const RuleState& state, const AlgorithmParams& params, TimeUs now) {
  return visit_algorithm<bool>(params, [&]<class A>(const typename A::Params& p) {
    return A::is_idle(std::get<typename A::State>(state), p, now);
  });
}

void note_refusal_state(RuleState& state, const AlgorithmParams& params, Refusal by, TimeUs now) {
  visit_algorithm<void>(params, [&]<class A>(const typename A::Params& p) {
    note_refusal_of<A>(std::get<typename A::State>(state), p, by, now);
  });
}

std::int64_t held_state(const RuleState& state, const AlgorithmParams& params, TimeUs now) {
  return visit_algorithm<std::int64_t>(params, [&]<class A>(const typename A::Params& p) {
    if constexpr (requires(const typename A::State& s) { A::held_units(s, p, now); }) {
      return A::held_units(std::get<typename A::State>(state), p, now);
    } else {
      return std::int64_t{0};
    }
  });
}

}  // namespace rlimit::core
