#include "load/key_picker.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace rlimit::bench {
namespace {

// log1p(x) / x, accurate near 0.
double helper1(double x) {
  return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x));
}
// expm1(x) / x, accurate near 0.
double helper2(double x) {
  return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1 + x * 0.5 * (1 + x / 3 * (1 + 0.25 * x));
}

}  // namespace

bool parse_skew(std::string_view text, Skew& out) {
  if (text == "uniform")
    out = Skew::kUniform;
  else if (text == "zipf")
    out = Skew::kZipf;
  else if (text == "sequential")
    out = Skew::kSequential;
  else
    return false;
  return true;
}

const char* skew_name(Skew skew) {
  switch (skew) {
    case Skew::kUniform:
      return "uniform";
    case Skew::kZipf:
      return "zipf";
    case Skew::kSequential:
      return "sequential";
  }
  return "?";
}

ZipfSampler::ZipfSampler(std::uint64_t n, double s) : n_(std::max<std::uint64_t>(n, 1)), s_(s) {
  if (s_ <= 0) s_ = 1e-9;  // callers use uniform for s <= 0; keep the math finite
  h_integral_x1_ = h_integral(1.5) - 1;
  h_integral_n_ = h_integral(static_cast<double>(n_) + 0.5);
  threshold_ = 2 - h_integral_inverse(h_integral(2.5) - h(2));
}

double ZipfSampler::h(double x) const { return std::exp(-s_ * std::log(x)); }

double ZipfSampler::h_integral(double x) const {
  const double log_x = std::log(x);
  return helper2((1 - s_) * log_x) * log_x;
}

double ZipfSampler::h_integral_inverse(double x) const {
  double t = x * (1 - s_);
  if (t < -1) t = -1;  // rounding near the lower end
  return std::exp(helper1(t) * x);
}

std::uint64_t ZipfSampler::sample(Rng& rng) const {
  for (;;) {
    const double u = h_integral_n_ + rng.uniform() * (h_integral_x1_ - h_integral_n_);
    const double x = h_integral_inverse(u);
    double k = std::floor(x + 0.5);
    k = std::clamp(k, 1.0, static_cast<double>(n_));
    if (k - x <= threshold_ || u >= h_integral(k + 0.5) - h(k)) {
      return static_cast<std::uint64_t>(k);
    }
  }
}

KeyPicker::KeyPicker(std::uint64_t keys, Skew skew, double zipf_s, std::uint64_t seed,
                     std::uint64_t start)
    : keys_(std::max<std::uint64_t>(keys, 1)),
      skew_(skew == Skew::kZipf && zipf_s <= 0 ? Skew::kUniform : skew),
      rng_(seed),
      zipf_(keys_, zipf_s > 0 ? zipf_s : 1.0),
      cursor_(start % keys_) {}

std::uint64_t KeyPicker::next() {
  switch (skew_) {
    case Skew::kUniform:
      return rng_.next() % keys_;
    case Skew::kZipf:
      return zipf_.sample(rng_) - 1;
    case Skew::kSequential: {
      const std::uint64_t k = cursor_;
      cursor_ = cursor_ + 1 == keys_ ? 0 : cursor_ + 1;
      return k;
    }
  }
  return 0;
}

void key_name(std::uint64_t index, std::string& out) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof(digits), index).ptr;
  out.assign("bench-");
  out.append(digits, end);
}

}  // namespace rlimit::bench
