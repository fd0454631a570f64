// FUZZ_CHECK(condition): a property a fuzz target asserts. A failure prints
// the condition and aborts, which libFuzzer reports as a crash and saves the
// input that broke it.
#pragma once

#include <google/protobuf/stubs/logging.h>

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                                                 \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

namespace rlimit::fuzz {

// libprotobuf logs every string field that is not UTF-8 at ERROR: millions of
// lines in a run, and most of the time spent. The parse result says it all.
inline void quiet_protobuf() { google::protobuf::SetLogHandler(nullptr); }

}  // namespace rlimit::fuzz
