// The input format of the targets that take several messages: records of a
// 2-byte big-endian length then that many bytes; a last record that is cut
// short keeps what there is. make_seeds.cc writes seeds in this format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rlimit::fuzz {

class Records {
 public:
  explicit Records(std::string_view input) : rest_(input) {}

  // The next record; false when the input is used up.
  bool next(std::string_view& record) {
    if (rest_.size() < 2) return false;
    const std::size_t length = (std::size_t{static_cast<unsigned char>(rest_[0])} << 8) |
                               std::size_t{static_cast<unsigned char>(rest_[1])};
    rest_.remove_prefix(2);
    record = rest_.substr(0, length);
    rest_.remove_prefix(record.size());
    return true;
  }

 private:
  std::string_view rest_;
};

// Appends one record (at most 65535 bytes of `bytes`).
inline void append_record(std::string& out, std::string_view bytes) {
  if (bytes.size() > 0xffff) bytes = bytes.substr(0, 0xffff);
  out.push_back(static_cast<char>(bytes.size() >> 8));
  out.push_back(static_cast<char>(bytes.size() & 0xff));
  out.append(bytes);
}

}  // namespace rlimit::fuzz
