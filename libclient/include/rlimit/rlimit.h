/* The C ABI of libclient: ask a local rlimitd whether a request may proceed.
 *
 * Ownership: rlimit_client_new() returns a client the caller owns and releases
 * with rlimit_client_free(). Every pointer passed in (options, descriptors and
 * their strings, output structs) is borrowed for the duration of the call
 * only; the library copies what it keeps (e.g. the socket path).
 *
 * Threading: a client is NOT thread-safe. Use one client per thread (each is
 * one Unix socket), or serialize calls on a shared one with a lock. Distinct
 * clients share nothing. rlimit_options_init() and rlimit_status_string() are
 * thread-safe.
 *
 * Failure stance: when the daemon is unreachable or slower than timeout_ms,
 * a check returns at once with `allowed` set by fail_mode (open by default)
 * and status RLIMIT_STATUS_UNAVAILABLE. The client reconnects by itself on a
 * later call, no more often than its reconnect backoff allows.
 *
 * No C++ exception ever crosses this ABI: failures are return codes. */
#ifndef RLIMIT_RLIMIT_H_
#define RLIMIT_RLIMIT_H_

#include <stddef.h>
#include <stdint.h>

#include "rlimit/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rlimit_client rlimit_client_t; /* opaque */

typedef enum rlimit_fail_mode {
  RLIMIT_FAIL_OPEN = 0,   /* daemon unavailable: allow */
  RLIMIT_FAIL_CLOSED = 1, /* daemon unavailable: deny */
} rlimit_fail_mode_t;

/* Mirrors rlimit::DecisionStatus. */
typedef enum rlimit_status {
  RLIMIT_STATUS_OK = 0,             /* decided by the daemon's rules (maybe none matched) */
  RLIMIT_STATUS_EXEMPT = 1,         /* an exemption matched; nothing charged */
  RLIMIT_STATUS_INVALID = 2,        /* the daemon rejected the check; see `error` */
  RLIMIT_STATUS_KEY_TABLE_FULL = 3, /* the daemon could not track a new key; its policy decided */
  RLIMIT_STATUS_UNAVAILABLE = 4,    /* no daemon answered; fail_mode decided */
  RLIMIT_STATUS_PROTOCOL_ERROR = 5, /* the daemon answered with an error; fail_mode decided */
} rlimit_status_t;

/* Return codes of the calls below. */
#define RLIMIT_OK 0
#define RLIMIT_ERR_INVALID_ARGUMENT (-1) /* a NULL where a pointer is required */
#define RLIMIT_ERR_NO_MEMORY (-2)
#define RLIMIT_ERR_INTERNAL (-3)
#define RLIMIT_ERR_DAEMON (-4) /* release/extend/reset: no answer, or the daemon refused */

#define RLIMIT_NAME_BYTES 128
#define RLIMIT_ERROR_BYTES 128

typedef struct rlimit_options {
  const char* socket_path;      /* NULL or "": $XDG_RUNTIME_DIR/rlimitd.sock or /tmp/rlimitd.sock */
  uint32_t timeout_ms;          /* per call, connect included (default 5) */
  rlimit_fail_mode_t fail_mode; /* default RLIMIT_FAIL_OPEN */
  uint32_t reconnect_backoff_min_ms; /* after a failed connect (default 10) */
  uint32_t reconnect_backoff_max_ms; /* doubling up to this (default 1000) */
  uint32_t max_frame_bytes;          /* default 65536 */
} rlimit_options_t;

typedef struct rlimit_descriptor {
  const char* key;   /* NUL-terminated, not NULL */
  const char* value; /* NUL-terminated, not NULL */
} rlimit_descriptor_t;

typedef struct rlimit_decision {
  int allowed; /* nonzero: proceed */
  rlimit_status_t status;
  int64_t retry_after_us; /* largest among denying rules; -1: never; 0 when allowed or unknown */
  uint64_t remaining;     /* least among the rules; UINT64_MAX when no rule judged the check */
  uint64_t limit;         /* limit of the tightest rule (least remaining); 0 when none */
  uint64_t period_ms;     /* period of that rule; 0 when none */
  size_t rule_count;      /* rules that judged the check (may exceed a detailed capacity) */
  char error[RLIMIT_ERROR_BYTES]; /* NUL-terminated, truncated; "" when none */
} rlimit_decision_t;

typedef struct rlimit_rule_status {
  char name[RLIMIT_NAME_BYTES]; /* NUL-terminated, truncated to 127 bytes */
  int allowed;
  uint64_t limit;
  uint64_t period_ms;
  uint64_t burst;
  uint64_t remaining;
  int64_t retry_after_us; /* 0 when allowed, -1 when never */
  int64_t reset_after_us; /* until the bucket is full again */
} rlimit_rule_status_t;

/* Fills `options` with the defaults. Always call it before setting fields, so
 * fields added later get their defaults too. */
RLIMIT_API void rlimit_options_init(rlimit_options_t* options);

/* Creates a client (it connects lazily, on the first check). `options` may be
 * NULL for the defaults. Returns NULL only when out of memory. */
RLIMIT_API rlimit_client_t* rlimit_client_new(const rlimit_options_t* options);

/* Closes the connection and frees the client. NULL is a no-op. */
RLIMIT_API void rlimit_client_free(rlimit_client_t* client);

/* Checks `n` descriptors at `cost` tokens (1 is the usual cost; 0 charges
 * nothing but still reports the buckets) and fills `*out`. Returns RLIMIT_OK
 * when `*out` holds a decision (including fail-open/closed ones). On an error
 * return `*out` (if not NULL) still holds a usable answer: the fail_mode's
 * (status UNAVAILABLE) when out of memory, a denial (status INVALID) for an
 * invalid argument. `descs` may be NULL when `n` is 0. */
RLIMIT_API int rlimit_check(rlimit_client_t* client, const rlimit_descriptor_t* descs, size_t n,
                            uint64_t cost, rlimit_decision_t* out);

/* As rlimit_check(), and also copies up to `rules_capacity` per-rule results
 * into `rules` (which may be NULL when the capacity is 0). out->rule_count
 * says how many rules there were, even beyond the capacity. */
RLIMIT_API int rlimit_check_detailed(rlimit_client_t* client, const rlimit_descriptor_t* descs,
                                     size_t n, uint64_t cost, rlimit_decision_t* out,
                                     rlimit_rule_status_t* rules, size_t rules_capacity);

/* "ok", "exempt", "invalid", "key_table_full", "unavailable",
 * "protocol_error"; "unknown" otherwise. A static string. */
RLIMIT_API const char* rlimit_status_string(rlimit_status_t status);

/* ---- Modes, leases and reset (appended; nothing above changed) -------- */

/* The concurrency leases one decision holds, as opaque tokens. Made by the
 * calls below; the caller owns it and frees it with rlimit_leases_free()
 * (after rlimit_release(), which does not free it). */
typedef struct rlimit_leases rlimit_leases_t;

/* As rlimit_check(), but consumes nothing (PEEK): "would this be allowed?". */
RLIMIT_API int rlimit_peek(rlimit_client_t* client, const rlimit_descriptor_t* descs, size_t n,
                           uint64_t cost, rlimit_decision_t* out);

/* As rlimit_check(), and keeps the leases of concurrency rules: `*leases`
 * (if `leases` is not NULL) is set to a new rlimit_leases_t when the
 * decision holds any, else to NULL. Release them when the work is done. */
RLIMIT_API int rlimit_check_leased(rlimit_client_t* client, const rlimit_descriptor_t* descs,
                                   size_t n, uint64_t cost, rlimit_decision_t* out,
                                   rlimit_leases_t** leases);

/* RESERVE: consumes now if the wait until the cost fits is at most
 * `max_wait_us` (-1: any wait), and sets `*delay_us` (if not NULL) to the
 * wait before proceeding (0 when none or not allowed). `leases` as in
 * rlimit_check_leased(); may be NULL. */
RLIMIT_API int rlimit_reserve(rlimit_client_t* client, const rlimit_descriptor_t* descs, size_t n,
                              uint64_t cost, int64_t max_wait_us, rlimit_decision_t* out,
                              int64_t* delay_us, rlimit_leases_t** leases);

/* As rlimit_reserve(), then sleeps the delay in the calling thread before
 * returning (beyond timeout_ms, which bounds the round trip only). */
RLIMIT_API int rlimit_acquire(rlimit_client_t* client, const rlimit_descriptor_t* descs, size_t n,
                              uint64_t cost, int64_t max_wait_us, rlimit_decision_t* out,
                              int64_t* delay_us, rlimit_leases_t** leases);

/* Releases every lease in `leases` (borrowed; still owned by the caller).
 * `*released` (if not NULL) gets how many the daemon released; the others
 * had expired or were released already. RLIMIT_OK when the daemon answered,
 * RLIMIT_ERR_DAEMON when it did not. NULL `leases` releases nothing. */
RLIMIT_API int rlimit_release(rlimit_client_t* client, const rlimit_leases_t* leases,
                              size_t* released);

/* Restarts the TTL of every lease in `leases` (a heartbeat for long work);
 * `*extended` as `*released` above. */
RLIMIT_API int rlimit_extend(rlimit_client_t* client, const rlimit_leases_t* leases,
                             size_t* extended);

/* Number of lease tokens held; 0 for NULL. */
RLIMIT_API size_t rlimit_leases_count(const rlimit_leases_t* leases);

/* Frees `leases` (without releasing them on the daemon). NULL is a no-op. */
RLIMIT_API void rlimit_leases_free(rlimit_leases_t* leases);

/* Forgets the daemon's state for every key a check with these descriptors
 * would touch. `*keys_reset` (if not NULL) gets how many keys held state.
 * On RLIMIT_ERR_DAEMON (unavailable, bad input, or the daemon's
 * allow_reset = false), `error` (if not NULL, `error_bytes` long) gets the
 * reason, NUL-terminated and truncated. */
RLIMIT_API int rlimit_reset(rlimit_client_t* client, const rlimit_descriptor_t* descs, size_t n,
                            uint64_t* keys_reset, char* error, size_t error_bytes);

/* ---- IETF RateLimit header fields (appended; nothing above changed) ---- */

#define RLIMIT_ERR_TRUNCATED (-5) /* an output buffer was too small */

/* Writes the values of the IETF RateLimit header fields for a decision
 * (draft-ietf-httpapi-ratelimit-headers: `RateLimit-Policy: "name";q=100;w=60`
 * and `RateLimit: "name";r=50;t=30`), one list member per rule in `rules`
 * (as rlimit_check_detailed() filled them), and `Retry-After` in whole seconds
 * when `allowed` is zero and `retry_after_us` is above 0 (else ""). Each
 * output is NUL-terminated; a NULL output with 0 bytes is skipped. Returns
 * RLIMIT_OK, or RLIMIT_ERR_TRUNCATED when some output did not fit (it then
 * holds "", never a cut field). The same text as rlimit::ratelimit_headers().
 * rlimit_rule_status_t does not say which rules are concurrency rules: set
 * period_ms to 0 in a copy for those, so their slots are shown
 * (qu="concurrent-requests") rather than their lease TTL as a window. */
RLIMIT_API int rlimit_ratelimit_headers(const rlimit_rule_status_t* rules, size_t n, int allowed,
                                        int64_t retry_after_us, char* policy, size_t policy_bytes,
                                        char* ratelimit, size_t ratelimit_bytes, char* retry_after,
                                        size_t retry_after_bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RLIMIT_RLIMIT_H_ */
