// Twenty-four bytes that hold one key's state in the KeyTable's packed slots:
// a TokenBucket, or the state of any algorithm whose state is trivially
// copyable and fits (GCRA, the leaky bucket, both windows, the smooth
// limiters). States that own memory (the sliding log, concurrency leases)
// live in the StateTable instead. The cell does not know which type it
// holds; the key's rule does. Plain data: copy it freely.
#pragma once

#include <cstring>
#include <new>
#include <type_traits>

namespace rlimit::core {

class alignas(8) StateCell {
 public:
  static constexpr std::size_t kBytes = 24;
  template <class T>
  static constexpr bool kFits =
      sizeof(T) <= kBytes && alignof(T) <= 8 && std::is_trivially_copyable_v<T>;

  template <class T>
  static StateCell of(const T& value) {
    static_assert(kFits<T>);
    StateCell cell;
    std::memcpy(cell.bytes_, &value, sizeof(T));
    return cell;
  }
  // The T the cell holds (the one it was made `of`).
  template <class T>
  T& as() {
    static_assert(kFits<T>);
    return *std::launder(reinterpret_cast<T*>(bytes_));
  }
  template <class T>
  const T& as() const {
    static_assert(kFits<T>);
    return *std::launder(reinterpret_cast<const T*>(bytes_));
  }

 private:
  unsigned char bytes_[kBytes] = {};
};

static_assert(sizeof(StateCell) == StateCell::kBytes);

}  // namespace rlimit::core
