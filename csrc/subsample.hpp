// Subsample kernels: the draws shared by the index/mask kernels (bound in
// subsample.cpp) and by the vote kernels (votes.hpp), and the index/mask
// kernels themselves.  Subsample b always uses the generator keyed by
// (seed, stream = b); draw i of that subsample uses counter i.  Hence every
// subsample is a pure function of (seed, b) and kernels give identical results
// for any number of threads and any processing order.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

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

// Indices of n_subsamples subsamples of size m (row b drawn with the key of
// (seed, b)), written row after row to out (n_subsamples * m entries).
inline void subsample_indices(std::uint64_t seed, std::int64_t n, std::int64_t m, std::int64_t n_subsamples,
                              bool replacement, std::int64_t* out) {
    if (replacement) {
        for (std::int64_t b = 0; b < n_subsamples; ++b) {
            draw_with_replacement(stream_key(seed, static_cast<std::uint64_t>(b)), n, m, out + b * m);
        }
        return;
    }
    std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
    std::vector<std::int64_t> swaps(static_cast<std::size_t>(m));
    for (std::int64_t i = 0; i < n; ++i) {
        perm[static_cast<std::size_t>(i)] = i;
    }
    for (std::int64_t b = 0; b < n_subsamples; ++b) {
        draw_without_replacement(stream_key(seed, static_cast<std::uint64_t>(b)), n, m, perm.data(), swaps.data(),
                                 out + b * m);
    }
}

// Poisson deletion masks: out[b * n + i] = uniform01(key_b, i) < keep_prob.
inline void deletion_masks(std::uint64_t seed, std::int64_t n, double keep_prob, std::int64_t n_subsamples,
                           bool* out) noexcept {
    for (std::int64_t b = 0; b < n_subsamples; ++b) {
        const std::uint64_t key = stream_key(seed, static_cast<std::uint64_t>(b));
        bool* row = out + b * n;
        for (std::int64_t i = 0; i < n; ++i) {
            row[i] = uniform01(key, static_cast<std::uint64_t>(i)) < keep_prob;
        }
    }
}

}  // namespace certkit
