#include "load/report.h"

#include <sys/utsname.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace rlimit::bench {
namespace {

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

struct Ratio {
  const char* name;
  double value;
  const char* meaning;
};

std::vector<Ratio> ratios(const Rows& rows) {
  std::vector<Ratio> out;
  const Result* d = rows.rlimitd;
  if (d == nullptr || d->decisions == 0) return out;
  if (rows.floor != nullptr && rows.floor->decisions > 0) {
    out.push_back({"p50_vs_floor",
                   ratio(d->latency.quantile_us(0.5), rows.floor->latency.quantile_us(0.5)),
                   "rlimitd p50 / raw socket p50 (target <= 1.25 for sync)"});
    out.push_back({"p99_vs_floor",
                   ratio(d->latency.quantile_us(0.99), rows.floor->latency.quantile_us(0.99)),
                   "rlimitd p99 / raw socket p99 (target <= 2 for sync)"});
  }
  const auto vs = [&](const char* name, const Result* r, const char* meaning) {
    if (r != nullptr && r->decisions > 0) {
      out.push_back({name, ratio(d->decisions_per_second(), r->decisions_per_second()), meaning});
    }
  };
  vs("throughput_vs_redis_lua", rows.redis_lua,
     "rlimitd decisions/s / Redis Lua (target >= 10 when pipelined)");
  vs("throughput_vs_redis_incr_expire", rows.redis_incr_expire,
     "rlimitd decisions/s / Redis INCR+EXPIRE");
  vs("throughput_vs_redis_incr", rows.redis_incr,
     "rlimitd decisions/s / Redis INCR (target >= 1 when pipelined)");
  return out;
}

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

}  // namespace

const char* mode_name(Mode mode) { return mode == Mode::kSync ? "sync" : "pipelined"; }

Machine describe_machine() {
  Machine m;
  m.cpus = std::thread::hardware_concurrency();
  m.cpu_model = read_cpu_model();
  utsname u{};
  if (::uname(&u) == 0) m.kernel = std::string(u.sysname) + " " + u.release;
  double load[1] = {0};
  if (::getloadavg(load, 1) == 1) m.load_1m = load[0];
  return m;
}

void print_table(const Workload& w, const std::vector<Result>& results, const Rows& rows,
                 const Memory& memory) {
  std::printf("workload: %s, %d client%s", mode_name(w.mode), w.clients, w.clients == 1 ? "" : "s");
  if (w.mode == Mode::kPipelined) std::printf(", depth %d", w.depth);
  std::printf(", batch %d, %llu keys %s", w.batch, static_cast<unsigned long long>(w.keys),
              skew_name(w.skew));
  if (w.skew == Skew::kZipf) std::printf(" (s=%.2f)", w.zipf_s);
  std::printf(", %.1f s each", w.seconds);
  if (w.client_cpu >= 0 || w.server_cpu >= 0) {
    const auto cpu = [](int c) { return c >= 0 ? std::to_string(c) : std::string("any"); };
    std::printf(", clients on CPU %s, servers on CPU %s", cpu(w.client_cpu).c_str(),
                cpu(w.server_cpu).c_str());
  }
  std::printf("\n");
  std::printf("%-36s %13s %9s %9s %9s %9s\n", "measurement", "decisions/s", "p50 us", "p99 us",
              "p99.9 us", "failed");
  for (const Result& r : results) {
    if (!r.error.empty()) {
      std::printf("%-36s  not measured: %s\n", r.name.c_str(), r.error.c_str());
      continue;
    }
    std::printf("%-36s %13.0f %9.2f %9.2f %9.2f %9llu\n", r.name.c_str(), r.decisions_per_second(),
                r.latency.quantile_us(0.5), r.latency.quantile_us(0.99),
                r.latency.quantile_us(0.999), static_cast<unsigned long long>(r.tally.failed));
  }
  std::printf("(latency is per request%s, from send to answer)\n",
              w.batch > 1 ? " of a whole batch" : "");
  for (const Ratio& r : ratios(rows))
    std::printf("%-32s %8.2fx   %s\n", r.name, r.value, r.meaning);
  if (memory.measured) {
    std::printf(
        "daemon memory: %llu keys driven (%llu held), VmRSS %ld -> %ld KiB: %.1f bytes per key\n",
        static_cast<unsigned long long>(memory.keys),
        static_cast<unsigned long long>(memory.keys_held), memory.rss_before_kib,
        memory.rss_after_kib, memory.bytes_per_key());
  }
}

void print_json(const Machine& machine, const Workload& w, const std::vector<Result>& results,
                const Rows& rows, const Memory& memory) {
  std::printf(
      "{\"machine\": {\"cpus\": %u, \"cpu_model\": %s, \"kernel\": %s, \"load_1m\": %.2f},\n",
      machine.cpus, json_string(machine.cpu_model).c_str(), json_string(machine.kernel).c_str(),
      machine.load_1m);
  std::printf(
      " \"workload\": {\"mode\": \"%s\", \"clients\": %d, \"depth\": %d, \"batch\": %d, "
      "\"keys\": %llu, \"skew\": \"%s\", \"zipf_s\": %.3f, \"seconds\": %.3f, \"rate\": %.0f, "
      "\"client_cpu\": %d, \"server_cpu\": %d},\n",
      mode_name(w.mode), w.clients, w.mode == Mode::kPipelined ? w.depth : 1, w.batch,
      static_cast<unsigned long long>(w.keys), skew_name(w.skew), w.zipf_s, w.seconds, w.rate,
      w.client_cpu, w.server_cpu);
  std::printf(" \"results\": [");
  bool first = true;
  for (const Result& r : results) {
    std::printf("%s\n  {\"name\": %s", first ? "" : ",", json_string(r.name).c_str());
    first = false;
    if (!r.error.empty()) {
      std::printf(", \"error\": %s}", json_string(r.error).c_str());
      continue;
    }
    std::printf(
        ", \"decisions\": %llu, \"requests\": %llu, \"seconds\": %.3f, "
        "\"decisions_per_second\": %.0f, \"allowed\": %llu, \"denied\": %llu, "
        "\"failed\": %llu, \"p50_us\": %.2f, \"p99_us\": %.2f, \"p999_us\": %.2f, "
        "\"mean_us\": %.2f, \"max_us\": %.2f}",
        static_cast<unsigned long long>(r.decisions), static_cast<unsigned long long>(r.requests),
        r.seconds, r.decisions_per_second(), static_cast<unsigned long long>(r.tally.allowed),
        static_cast<unsigned long long>(r.tally.denied),
        static_cast<unsigned long long>(r.tally.failed), r.latency.quantile_us(0.5),
        r.latency.quantile_us(0.99), r.latency.quantile_us(0.999), r.latency.mean_ns() / 1000.0,
        static_cast<double>(r.latency.max_ns()) / 1000.0);
  }
  std::printf("],\n \"ratios\": {");
  first = true;
  for (const Ratio& r : ratios(rows)) {
    std::printf("%s\"%s\": %.3f", first ? "" : ", ", r.name, r.value);
    first = false;
  }
  std::printf("}");
  if (memory.measured) {
    std::printf(
        ",\n \"memory\": {\"keys\": %llu, \"keys_held\": %llu, \"rss_before_kib\": %ld, "
        "\"rss_after_kib\": %ld, \"bytes_per_key\": %.1f}",
        static_cast<unsigned long long>(memory.keys),
        static_cast<unsigned long long>(memory.keys_held), memory.rss_before_kib,
        memory.rss_after_kib, memory.bytes_per_key());
  }
  std::printf("}\n");
}

}  // namespace rlimit::bench
