/* Symbol visibility for libclient's public API. The shared library is built
 * with hidden visibility (its embedded protobuf code must not clash with a host
 * application's), so everything a caller may use is marked RLIMIT_API. Usable
 * from C and C++. */
#ifndef RLIMIT_EXPORT_H_
#define RLIMIT_EXPORT_H_

#if defined(__GNUC__) || defined(__clang__)
#define RLIMIT_API __attribute__((visibility("default")))
#else
#define RLIMIT_API
#endif

#endif /* RLIMIT_EXPORT_H_ */
