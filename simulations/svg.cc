#include "svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "report.h"

namespace rlimit::sim {
namespace {

constexpr double kWidth = 960;
constexpr double kHeight = 520;
constexpr double kLeft = 80;
constexpr double kRight = 210;  // room for the legend
constexpr double kTop = 64;
constexpr double kBottom = 56;

// Colours that stay apart for readers with common colour blindness (Okabe-Ito).
constexpr const char* kNodeColours[] = {"#E69F00", "#009E73", "#CC79A7", "#56B4E9",
                                        "#D55E00", "#F0E442", "#999999", "#000000"};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A "nice" tick step (1, 2 or 5 times a power of ten) for about `ticks` ticks.
double nice_step(double span, int ticks) {
  if (span <= 0) return 1;
  const double raw = span / ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

std::string tick_label(double v) {
  char buf[32];
  if (std::abs(v - std::round(v)) < 1e-9) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%g", v);
  }
  return buf;
}

// Centred moving average of per-sample counts, as a rate per second.
std::vector<double> smooth(const std::vector<double>& counts, std::size_t k, double per_s) {
  std::vector<double> out(counts.size(), 0);
  const std::size_t half = k / 2;
  double sum = 0;
  std::size_t lo = 0, hi = 0;  // window [lo, hi)
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const std::size_t want_lo = i >= half ? i - half : 0;
    const std::size_t want_hi = std::min(counts.size(), i + (k - half));
    while (hi < want_hi) sum += counts[hi++];
    while (lo < want_lo) sum -= counts[lo++];
    out[i] = sum / static_cast<double>(hi - lo) * per_s;
  }
  return out;
}

}  // namespace

void write_svg(const Results& r, const PlotOptions& options, std::ostream& out) {
  const Series& s = r.series;
  const std::size_t samples = std::min<std::size_t>(
      s.samples(), static_cast<std::size_t>((r.duration_us + s.sample_us - 1) / s.sample_us));
  const double per_s = 1e6 / static_cast<double>(s.sample_us);
  const std::size_t k =
      std::max<std::size_t>(1, static_cast<std::size_t>(options.smooth_us / s.sample_us));
  auto series_of = [&](const std::vector<std::uint64_t>& v) {
    std::vector<double> d(samples);
    for (std::size_t i = 0; i < samples; ++i) d[i] = static_cast<double>(v[i]);
    return smooth(d, k, per_s);
  };
  const std::vector<double> admitted = series_of(s.admitted);
  const std::vector<double> ideal = series_of(s.ideal);
  const std::vector<double> requested = series_of(s.arrivals);
  const std::uint32_t shown =
      s.per_node.empty() ? 0 : std::min<std::uint32_t>(options.max_nodes, r.nodes);
  std::vector<std::vector<double>> nodes;
  for (std::uint32_t n = 0; n < shown; ++n) {
    std::vector<double> d(samples);
    for (std::size_t i = 0; i < samples; ++i) d[i] = s.per_node[n * s.samples() + i];
    nodes.push_back(smooth(d, k, per_s));
  }

  // Scales: time in seconds across, rate per second up.
  const double t_max = static_cast<double>(r.duration_us) / 1e6;
  double y_max = r.limit_per_s;
  for (std::size_t i = 0; i < samples; ++i) y_max = std::max({y_max, admitted[i], ideal[i]});
  // The requested rate may dwarf the rest; draw it clipped rather than
  // squash the lines that matter.
  y_max = std::max(1.0, y_max * 1.15);
  const double plot_w = kWidth - kLeft - kRight;
  const double plot_h = kHeight - kTop - kBottom;
  auto x = [&](double t) { return kLeft + t / t_max * plot_w; };
  auto y = [&](double v) { return kTop + plot_h - std::min(v, y_max) / y_max * plot_h; };
  auto polyline = [&](const std::vector<double>& v, const char* colour, double width,
                      const char* dash) {
    out << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"" << width << "\"";
    if (dash[0] != '\0') out << " stroke-dasharray=\"" << dash << "\"";
    out << " points=\"";
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double t = (static_cast<double>(i) + 0.5) * static_cast<double>(s.sample_us) / 1e6;
      out << num(x(t)) << "," << num(y(v[i])) << (i + 1 < v.size() ? " " : "");
    }
    out << "\"/>\n";
  };

  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" viewBox=\"0 0 " << kWidth << " " << kHeight
      << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out << "<text x=\"" << kLeft << "\" y=\"24\" font-size=\"16\" font-weight=\"bold\">"
      << escape(r.scenario) << ": admitted rate against the limit</text>\n";
  out << "<text x=\"" << kLeft << "\" y=\"44\" fill=\"#444\">" << r.nodes << " nodes, seed "
      << r.seed << "; rates averaged over "
      << escape(format_seconds(static_cast<TimeUs>(k) * s.sample_us)) << "; admitted "
      << escape(percent(r.error_ratio())) << " vs ideal; worst "
      << escape(format_seconds(r.window_us)) << " window +" << r.worst_over_window
      << " tokens</text>\n";

  // Fault spans behind everything.
  for (std::size_t p = 0; p < r.partitions.size(); ++p) {
    const Partition& part = r.partitions[p];
    const double x0 = x(static_cast<double>(part.start_us) / 1e6);
    const double x1 = x(std::min(t_max, static_cast<double>(part.end_us) / 1e6));
    out << "<rect x=\"" << num(x0) << "\" y=\"" << kTop << "\" width=\"" << num(x1 - x0)
        << "\" height=\"" << plot_h << "\" fill=\"#fbdada\"/>\n";
    out << "<text x=\"" << num(x0 + 4) << "\" y=\"" << kTop + 14 << "\" fill=\"#a33\">"
        << (part.one_way ? "one-way partition" : "partition") << " (" << part.groups.size() + 0
        << " groups)</text>\n";
  }
  for (const Crash& c : r.crashes) {
    const double x0 = x(static_cast<double>(c.at_us) / 1e6);
    const double x1 =
        x(c.restart_us ? std::min(t_max, static_cast<double>(*c.restart_us) / 1e6) : t_max);
    out << "<rect x=\"" << num(x0) << "\" y=\"" << kTop << "\" width=\""
        << num(std::max(1.0, x1 - x0)) << "\" height=\"" << plot_h << "\" fill=\"#fde8c8\"/>\n";
    out << "<text x=\"" << num(x0 + 4) << "\" y=\"" << kTop + 28 << "\" fill=\"#a60\">n" << c.node
        << " down</text>\n";
  }

  // Grid and axes.
  const double x_step = nice_step(t_max, 10);
  for (double t = 0; t <= t_max + 1e-9; t += x_step) {
    out << "<line x1=\"" << num(x(t)) << "\" y1=\"" << kTop << "\" x2=\"" << num(x(t)) << "\" y2=\""
        << kTop + plot_h << "\" stroke=\"#e4e4e4\"/>\n";
    out << "<text x=\"" << num(x(t)) << "\" y=\"" << kTop + plot_h + 18
        << "\" text-anchor=\"middle\">" << tick_label(t) << "</text>\n";
  }
  const double y_step = nice_step(y_max, 6);
  for (double v = 0; v <= y_max + 1e-9; v += y_step) {
    out << "<line x1=\"" << kLeft << "\" y1=\"" << num(y(v)) << "\" x2=\"" << kLeft + plot_w
        << "\" y2=\"" << num(y(v)) << "\" stroke=\"#e4e4e4\"/>\n";
    out << "<text x=\"" << kLeft - 8 << "\" y=\"" << num(y(v) + 4) << "\" text-anchor=\"end\">"
        << tick_label(v) << "</text>\n";
  }
  out << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plot_w << "\" height=\""
      << plot_h << "\" fill=\"none\" stroke=\"#333\"/>\n";
  out << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"" << kHeight - 16
      << "\" text-anchor=\"middle\">simulated time (s)</text>\n";
  out << "<text transform=\"translate(20," << kTop + plot_h / 2
      << ") rotate(-90)\" text-anchor=\"middle\">tokens per second</text>\n";

  // Lines: requested (context), per node, ideal, limit, admitted on top.
  polyline(requested, "#bbbbbb", 1, "2,3");
  for (std::uint32_t n = 0; n < shown; ++n) polyline(nodes[n], kNodeColours[n % 8], 1, "");
  polyline(ideal, "#555555", 2, "");
  out << "<line x1=\"" << kLeft << "\" y1=\"" << num(y(r.limit_per_s)) << "\" x2=\""
      << kLeft + plot_w << "\" y2=\"" << num(y(r.limit_per_s))
      << "\" stroke=\"#000\" stroke-width=\"1.5\" "
      << "stroke-dasharray=\"8,4\"/>\n";
  polyline(admitted, "#0072B2", 2.5, "");

  // Legend.
  double ly = kTop + 8;
  const double lx = kLeft + plot_w + 16;
  auto entry = [&](const std::string& label, const char* colour, double width, const char* dash) {
    out << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 28 << "\" y2=\"" << ly
        << "\" stroke=\"" << colour << "\" stroke-width=\"" << width << "\"";
    if (dash[0] != '\0') out << " stroke-dasharray=\"" << dash << "\"";
    out << "/>\n<text x=\"" << lx + 34 << "\" y=\"" << ly + 4 << "\">" << escape(label)
        << "</text>\n";
    ly += 20;
  };
  entry("admitted, all nodes", "#0072B2", 2.5, "");
  entry("ideal (one limiter)", "#555555", 2, "");
  entry("limit " + num(r.limit_per_s) + "/s", "#000", 1.5, "8,4");
  entry("requested", "#bbbbbb", 1, "2,3");
  for (std::uint32_t n = 0; n < shown; ++n) {
    entry("admitted at n" + std::to_string(n), kNodeColours[n % 8], 1, "");
  }
  if (shown < r.nodes && shown > 0) {
    out << "<text x=\"" << lx << "\" y=\"" << ly + 4 << "\" fill=\"#444\">(" << shown << " of "
        << r.nodes << " nodes drawn)</text>\n";
    ly += 20;
  }
  if (!r.partitions.empty()) {
    out << "<rect x=\"" << lx << "\" y=\"" << ly - 6
        << "\" width=\"28\" height=\"12\" fill=\"#fbdada\"/>"
        << "<text x=\"" << lx + 34 << "\" y=\"" << ly + 4 << "\">partition</text>\n";
    ly += 20;
  }
  if (!r.crashes.empty()) {
    out << "<rect x=\"" << lx << "\" y=\"" << ly - 6
        << "\" width=\"28\" height=\"12\" fill=\"#fde8c8\"/>"
        << "<text x=\"" << lx + 34 << "\" y=\"" << ly + 4 << "\">node down</text>\n";
  }
  out << "</svg>\n";
}

}  // namespace rlimit::sim
