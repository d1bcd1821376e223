// Counter-based random numbers keyed by (seed, stream, counter).
//
// Every draw is a pure function of its key, so results never depend on the
// number of threads or on the order in which subsamples are processed.  The
// construction is SplitMix64's output mix applied to a Weyl sequence whose
// start is derived from (seed, stream):
//
//   key(seed, stream)          = mix(seed + mix(stream + GAMMA))
//   draw(seed, stream, i)      = mix(key(seed, stream) + (i + 1) * GAMMA)
//
// (all arithmetic modulo 2^64).  `bounded` maps draws to {0, ..., range-1}
// without bias by Lemire's nearly divisionless method (below); a rejected draw
// is replaced by the draw at counter i + (attempt << 40).  The NumPy reference
// in tests/test_kernels.py reproduces all of this bit for bit.
#pragma once

#include <cstdint>

#if !defined(__SIZEOF_INT128__)
#error "certkit._core needs a compiler with unsigned __int128 (GCC or Clang)"
#endif

namespace certkit {

constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ULL;
constexpr std::uint64_t kRetryShift = 40;

inline std::uint64_t mix64(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

inline std::uint64_t stream_key(std::uint64_t seed, std::uint64_t stream) noexcept {
    return mix64(seed + mix64(stream + kGamma));
}

inline std::uint64_t draw64(std::uint64_t key, std::uint64_t counter) noexcept {
    return mix64(key + (counter + 1) * kGamma);
}

// Uniform double in [0, 1) with 53 random bits.
inline double uniform01(std::uint64_t key, std::uint64_t counter) noexcept {
    return static_cast<double>(draw64(key, counter) >> 11) * 0x1.0p-53;
}

// Unbiased integer in [0, range), range >= 1 (Lemire, "Fast random integer
// generation in an interval", ACM TOMACS 2019).  The 128-bit product
// r * range = high * 2^64 + low maps a draw r to high in [0, range); each value
// of high is hit by either floor(2^64 / range) or that plus one draws, and
// rejecting the draws with low < threshold = 2^64 mod range leaves exactly
// floor(2^64 / range) per value.  Since threshold < range, the division is
// only needed when low < range, i.e. with probability below range / 2^64.
inline std::uint64_t bounded(std::uint64_t key, std::uint64_t counter, std::uint64_t range) noexcept {
    for (std::uint64_t attempt = 0;; ++attempt) {
        const unsigned __int128 product =
            static_cast<unsigned __int128>(draw64(key, counter + (attempt << kRetryShift))) * range;
        const auto low = static_cast<std::uint64_t>(product);
        if (low >= range || low >= (0 - range) % range) {
            return static_cast<std::uint64_t>(product >> 64);
        }
    }
}

}  // namespace certkit
