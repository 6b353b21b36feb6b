// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. A draw is a pure function of (key, counter), so a sample's value
// depends on which call, row and element it is for, never on which thread computes it.
//
//   tdp::fused::Philox4x32 rng(/*seed=*/42);
//   std::array<uint32_t, 4> r = rng({call_lo, call_hi, row, block});   // four 32-bit draws
//   float u = tdp::fused::uniform01(r[0]);                               // in [0, 1)
#pragma once

#include <array>
#include <cstdint>

namespace tdp::fused {

class Philox4x32 {
 public:
  using Counter = std::array<uint32_t, 4>;
  explicit Philox4x32(uint64_t seed = 0)
      : key_{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)} {}

  Counter operator()(Counter c) const {
    uint32_t k0 = key_[0], k1 = key_[1];
    for (int round = 0; round < 10; ++round) {
      const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c[0];
      const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c[2];
      c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<uint32_t>(p0)};
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    return c;
  }

 private:
  std::array<uint32_t, 2> key_;
};

// The counter every draw of the fused plan is addressed by: {call low, call high, row, block}, so
// a row's draws depend on the call, its index and the block, never on the batch it came in.
inline Philox4x32::Counter philox_counter(uint64_t call, uint64_t row, uint32_t block) {
  return {static_cast<uint32_t>(call), static_cast<uint32_t>(call >> 32), static_cast<uint32_t>(row), block};
}

// 24 random bits scaled to [0, 1) (every value exactly representable in float).
inline float uniform01(uint32_t r) { return static_cast<float>(r >> 8) * (1.0f / 16777216.0f); }
// The same, in (0, 1]: safe under log().
inline float uniform01_open0(uint32_t r) { return static_cast<float>((r >> 8) + 1) * (1.0f / 16777216.0f); }

}  // namespace tdp::fused
