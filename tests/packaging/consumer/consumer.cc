// Asks the daemon on argv[1] one check for user=alice and prints
// "allowed ok" (or what it was told); exits 0 only when a daemon decided.
#include <rlimit/client.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer SOCKET\n");
    return 2;
  }
  rlimit::ClientOptions options;
  options.socket_path = argv[1];
  options.timeout_ms = 2000;
  rlimit::Client client(options);
  const rlimit::Decision decision = client.check({{"user", "alice"}});
  std::printf("%s %s\n", decision.allowed ? "allowed" : "denied",
              rlimit::to_string(decision.status));
  return decision.status == rlimit::DecisionStatus::kOk ? 0 : 1;
}
