// The outputs of a run: a table a person reads on stdout, JSON for
// machines, and a CSV time series (one row per sample). docs/accuracy.md
// defines every figure.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "results.h"

namespace rlimit::sim {

void print_table(const Results& r, std::ostream& out);
void write_json(const Results& r, std::ostream& out);
// t_s, limit_per_s, ideal_per_s, admitted_per_s, arrivals_per_s, then one
// admitted_per_s column per node.
void write_csv(const Results& r, std::ostream& out);

// "12.5s", "340ms": for tables.
std::string format_seconds(TimeUs us);
// A ratio as a signed percentage with two decimals: "+0.12%", "-0.03%".
std::string percent(double ratio);
// A number with `digits` decimals: fixed(1.234, 2) is "1.23".
std::string fixed(double v, int digits);
// A JSON string literal (quotes, backslashes and control characters escaped).
std::string quote(std::string_view s);
// A digest as 16 hex digits, as the table prints it.
std::string hex(std::uint64_t v);
// Packets and bytes a node sent per simulated second, averaged over nodes.
double packets_per_node_s(const Results& r);
double bytes_per_node_s(const Results& r);

}  // namespace rlimit::sim
