/* Using libclient from C. Usage: rlimit-c-example [SOCKET_PATH] [USER] */
#include <inttypes.h>
#include <stdio.h>

#include "rlimit/rlimit.h"

int main(int argc, char** argv) {
  rlimit_options_t options;
  rlimit_options_init(&options); /* defaults first, then what we change */
  if (argc > 1) options.socket_path = argv[1];
  options.timeout_ms = 10;
  options.fail_mode = RLIMIT_FAIL_OPEN;

  rlimit_client_t* client = rlimit_client_new(&options);
  if (client == NULL) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }

  const rlimit_descriptor_t descs[] = {
      {"user", argc > 2 ? argv[2] : "alice"},
      {"method", "GET"},
      {"path", "/api/items"},
  };
  rlimit_decision_t decision;
  rlimit_rule_status_t rules[8];
  const int rc = rlimit_check_detailed(client, descs, sizeof(descs) / sizeof(descs[0]), 1,
                                       &decision, rules, sizeof(rules) / sizeof(rules[0]));
  if (rc != RLIMIT_OK) fprintf(stderr, "rlimit_check_detailed failed: %d\n", rc);

  printf("%s (status %s)", decision.allowed ? "allowed" : "denied",
         rlimit_status_string(decision.status));
  if (decision.status == RLIMIT_STATUS_UNAVAILABLE) {
    /* Fail open: the daemon is down or slow; serve and move on. */
    printf(": %s", decision.error);
  }
  printf("\n");
  if (decision.rule_count > 0) {
    printf("tightest: %" PRIu64 " remaining of %" PRIu64 " per %" PRIu64 " ms\n",
           decision.remaining, decision.limit, decision.period_ms);
  }
  if (!decision.allowed && decision.retry_after_us > 0) {
    printf("retry after %" PRId64 " us\n", decision.retry_after_us);
  }
  for (size_t i = 0; i < decision.rule_count && i < sizeof(rules) / sizeof(rules[0]); ++i) {
    printf("  rule %-24s %s remaining=%" PRIu64 "\n", rules[i].name,
           rules[i].allowed ? "allowed" : "denied ", rules[i].remaining);
  }

  rlimit_client_free(client);
  return 0;
}
