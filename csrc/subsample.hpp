// Subsample draws shared by the index/mask kernels (subsample.cpp) and the
// vote kernels (votes.cpp).  Subsample b always uses the generator keyed by
// (seed, stream = b); draw i of that subsample uses counter i.  Hence every
// subsample is a pure function of (seed, b) and kernels give identical results
// for any number of threads and any processing order.
#pragma once

#include <cstdint>
#include <utility>

#include "rng.hpp"

namespace certkit {

// Row of a subsample of size m drawn without replacement from {0, ..., n-1}
// by a partial Fisher–Yates shuffle:
//   for i in 0..m-1: j = i + bounded(key, i, n - i); swap(perm[i], perm[j]); out[i] = perm[i]
// `perm` must hold the identity permutation of length n on entry and holds it
// again on exit (the swaps are undone in reverse order, so the cost is O(m)).
// `swaps` is scratch of length m.
inline void draw_without_replacement(std::uint64_t key, std::int64_t n, std::int64_t m, std::int64_t* perm,
                                     std::int64_t* swaps, std::int64_t* out) noexcept {
    for (std::int64_t i = 0; i < m; ++i) {
        const auto j = i + static_cast<std::int64_t>(
                               bounded(key, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(n - i)));
        std::swap(perm[i], perm[j]);
        swaps[i] = j;
        out[i] = perm[i];
    }
    for (std::int64_t i = m - 1; i >= 0; --i) {
        std::swap(perm[i], perm[swaps[i]]);
    }
}

// Row of a subsample of size m drawn with replacement: out[i] = bounded(key, i, n).
inline void draw_with_replacement(std::uint64_t key, std::int64_t n, std::int64_t m, std::int64_t* out) noexcept {
    for (std::int64_t i = 0; i < m; ++i) {
        out[i] = static_cast<std::int64_t>(bounded(key, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(n)));
    }
}

// Poisson (Bernoulli) deletion: example i is kept iff uniform01(key, i) < keep_prob.
// Writes the kept indices in increasing order to `out` and returns how many.
inline std::int64_t draw_poisson(std::uint64_t key, std::int64_t n, double keep_prob, std::int64_t* out) noexcept {
    std::int64_t count = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        if (uniform01(key, static_cast<std::uint64_t>(i)) < keep_prob) {
            out[count++] = i;
        }
    }
    return count;
}

}  // namespace certkit
