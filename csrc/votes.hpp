// Vote kernels of the subsampling certificate for circuits (and of its
// partition-aggregation variant, DPA); bound in votes.cpp as the submodule
// certkit._core.votes.
//
// subsample_votes: for each subsample b (drawn exactly as subsample_indices /
// deletion_masks draw row b for the same seed) the mean score of every
// component over the subsample is computed, the decision rule (top-k or
// threshold) selects components, and counts[j] is the number of subsamples
// whose selection contains j.
//
// Floating-point contract (the NumPy reference in tests/test_kernels.py
// reproduces it bit for bit): the sum of component j over a subsample is
// accumulated from 0.0 in the order in which the subsample lists its rows
// (draw order; increasing index for Poisson), one rounding per addition, and
// the mean is that sum divided by the subsample size.  Top-k orders components
// by (mean descending, index ascending); the threshold rule keeps mean >= tau.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <thread>
#include <vector>

#include "subsample.hpp"

namespace certkit {

enum class Scheme { kWithoutReplacement, kWithReplacement, kPoisson };

// The decision rule: the top_k components by (mean descending, index
// ascending) when top_k is true, else every component with mean >= threshold.
struct Rule {
    bool top_k = false;
    std::int64_t k = 0;
    double threshold = 0.0;
};

// With GCC on x86-64 Linux, tile_means is also compiled for AVX2 and the
// variant is picked at load time (ifunc).  Vector width changes nothing in the
// result: every column is still summed element by element in the same order.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define CERTKIT_AVX2_CLONE __attribute__((target_clones("avx2", "default")))
#else
#define CERTKIT_AVX2_CLONE
#endif

// Columns per tile of the packed score layout (TiledScores); subsamples per
// chunk (their row lists and means are kept while the tiles are swept), and the
// row count at which a chunk is closed early (bounds the row lists of large
// Poisson subsamples; a single subsample may still exceed it).
constexpr std::int64_t kTile = 32;
constexpr std::int64_t kChunk = 64;
constexpr std::int64_t kChunkRows = std::int64_t{1} << 16;

// Four doubles (GCC/Clang vector extension): one AVX register, two SSE/NEON ones.
using Lanes = double __attribute__((vector_size(4 * sizeof(double))));
constexpr std::int64_t kLanes = 4;

// The score matrix re-laid out for cache blocking: tile t holds columns
// [t * kTile, (t + 1) * kTile) of all n rows, row after row (zero-padded past
// N), so one tile is a contiguous block of n * kTile doubles (256 KB for
// n = 1000) that stays in L2 while a chunk of subsamples is summed over it.
class TiledScores {
   public:
    TiledScores(const double* scores, std::int64_t n, std::int64_t n_components)
        : n_(n), n_tiles_((n_components + kTile - 1) / kTile),
          data_(static_cast<std::size_t>(n_tiles_ * n * kTile), 0.0) {
        for (std::int64_t t = 0; t < n_tiles_; ++t) {
            const std::int64_t width = std::min(kTile, n_components - t * kTile);
            for (std::int64_t i = 0; i < n; ++i) {
                std::copy_n(scores + i * n_components + t * kTile, width, data_.data() + (t * n + i) * kTile);
            }
        }
    }

    std::int64_t n_tiles() const { return n_tiles_; }
    const double* tile(std::int64_t t) const { return data_.data() + t * n_ * kTile; }

   private:
    std::int64_t n_;
    std::int64_t n_tiles_;
    std::vector<double> data_;
};

// Means over `count >= 1` rows of the kTile columns c of one tile:
// out[c] = (sum over r of tile[offsets[r] + c]) / count, where offsets[r] is
// row index * kTile and the sum is added from 0.0 in the order of `offsets`.
// With AVX2 the kTile partial sums stay in eight registers for the whole loop
// (the SSE2 default variant spills some of them).
CERTKIT_AVX2_CLONE inline void tile_means(const double* tile, const std::int64_t* offsets, std::int64_t count,
                                   double* out) {
    Lanes acc[kTile / kLanes] = {};
    for (std::int64_t r = 0; r < count; ++r) {
        const double* row = tile + offsets[r];
        for (std::int64_t v = 0; v < kTile / kLanes; ++v) {
            Lanes x;
            std::memcpy(&x, row + v * kLanes, sizeof x);
            acc[v] += x;
        }
    }
    const auto divisor = static_cast<double>(count);
    for (std::int64_t v = 0; v < kTile / kLanes; ++v) {
        const Lanes mean = acc[v] / divisor;
        std::memcpy(out + v * kLanes, &mean, sizeof mean);
    }
}

// Selects components by the rule and reports each selected j through mark(j).
// One Selector per thread, reused across subsamples (no allocation per call).
//
// Top-k is the first k components in the strict total order (mean descending,
// index ascending); means are never NaN because scores are finite, so the
// selected set is unique and does not depend on how it is found.  To avoid a
// full selection over all N components per subsample, the selector keeps a
// pivot: the (k + margin + 1)-th largest mean of an earlier subsample.  If at
// least k components have mean >= pivot, they contain the top-k set (any
// component below the pivot is preceded by at least k others), so selecting
// among those candidates suffices; otherwise it falls back to all N and takes
// the new pivot from this subsample.  When the candidates exceed twice the
// target count, the pivot is raised to this subsample's (k + margin + 1)-th
// largest mean.  (Used when k + margin is at most N / 2; for larger k a plain
// selection is as fast.)  Candidates are (mean, index) pairs, so comparisons
// need no indirection.
class Selector {
   public:
    Selector(const Rule& rule, std::int64_t n_components)
        : rule_(rule),
          n_(n_components),
          target_(rule.k + rule.k / 4 + 8),
          entries_(static_cast<std::size_t>(n_components)) {}

    template <class Mark>
    void operator()(const double* mean, Mark&& mark) {
        Entry* entries = entries_.data();
        if (!rule_.top_k) {
            mark_first(entries, gather(mean, rule_.threshold), mark);
            return;
        }
        const std::int64_t k = rule_.k;
        if (k == n_) {
            for (std::int64_t j = 0; j < n_; ++j) {
                mark(j);
            }
            return;
        }
        if (2 * target_ > n_) {  // candidates would not be much fewer than N
            gather(mean, -std::numeric_limits<double>::infinity());
            std::nth_element(entries, entries + k, entries + n_, before);
            mark_first(entries, k, mark);
            return;
        }
        if (has_pivot_) {
            std::int64_t count = gather(mean, pivot_);
            if (count >= k) {
                std::nth_element(entries, entries + k, entries + count, before);
                mark_first(entries, k, mark);
                if (count > 2 * target_) {  // too many candidates: tighten the pivot for the next subsample
                    std::nth_element(entries + k, entries + target_, entries + count, before);
                    pivot_ = entries[target_].mean;
                }
                return;
            }
        }
        gather(mean, -std::numeric_limits<double>::infinity());
        std::nth_element(entries, entries + target_, entries + n_, before);
        pivot_ = entries[target_].mean;
        has_pivot_ = true;
        std::nth_element(entries, entries + k, entries + target_, before);
        mark_first(entries, k, mark);
    }

   private:
    struct Entry {
        double mean;
        std::int64_t index;
    };

    // The strict total order of the top-k rule: mean descending, then index ascending.
    static bool before(const Entry& x, const Entry& y) {
        return x.mean > y.mean || (x.mean == y.mean && x.index < y.index);
    }

    // Writes the components with mean >= bound to entries_ (branch-free) and returns how many.
    std::int64_t gather(const double* mean, double bound) {
        Entry* entries = entries_.data();
        std::int64_t count = 0;
        for (std::int64_t j = 0; j < n_; ++j) {
            entries[count] = Entry{mean[j], j};
            count += static_cast<std::int64_t>(mean[j] >= bound);
        }
        return count;
    }

    template <class Mark>
    static void mark_first(const Entry* entries, std::int64_t count, Mark& mark) {
        for (std::int64_t i = 0; i < count; ++i) {
            mark(entries[i].index);
        }
    }

    Rule rule_;
    std::int64_t n_;
    std::int64_t target_;  // rank (0-based) of the component whose mean becomes the pivot
    std::vector<Entry> entries_;
    double pivot_ = 0.0;
    bool has_pivot_ = false;
};

// Runs fn(thread_index, begin, end) on n_threads contiguous blocks of
// [0, total).  Every started thread is joined, and the first exception (from
// starting a thread or thrown inside one, e.g. std::bad_alloc) is rethrown in
// the calling thread after all have finished.
template <class Fn>
void run_blocks(std::int64_t total, int n_threads, Fn&& fn) {
    if (n_threads == 1) {
        fn(0, std::int64_t{0}, total);
        return;
    }
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(n_threads));
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n_threads) + 1);
    try {
        for (int t = 0; t < n_threads; ++t) {
            const std::int64_t begin = total * t / n_threads;
            const std::int64_t end = total * (t + 1) / n_threads;
            threads.emplace_back([&fn, &errors, t, begin, end] {
                try {
                    fn(t, begin, end);
                } catch (...) {
                    errors[static_cast<std::size_t>(t)] = std::current_exception();
                }
            });
        }
    } catch (...) {
        errors.back() = std::current_exception();
    }
    for (auto& thread : threads) {
        thread.join();
    }
    for (const auto& error : errors) {
        if (error) {
            std::rethrow_exception(error);
        }
    }
}

// counts[j] = number of the n_subsamples subsamples (drawn as
// subsample_indices / deletion_masks draw them for seed) whose selection by
// `rule` contains j, for the (n, N) row-major score matrix; the work is split
// over min(n_threads, hardware threads, n_subsamples) threads (0: all hardware threads; the result does not
// depend on it).
inline void subsample_votes(const double* scores, std::int64_t n, std::int64_t n_components, Scheme scheme,
                            std::int64_t m, double keep_prob, std::int64_t n_subsamples, const Rule& rule,
                            std::uint64_t seed, std::int64_t n_threads, std::int64_t* total) {
    // Never more threads than hardware threads or subsamples: each thread holds buffers of about
    // 8 * (N + min(kChunk, its subsamples) * N + m + n) bytes, so extra threads only cost memory.
    const std::int64_t hardware = std::max<std::int64_t>(1, std::thread::hardware_concurrency());
    std::int64_t threads = n_threads == 0 ? hardware : std::min(n_threads, hardware);
    threads = std::max<std::int64_t>(1, std::min(threads, n_subsamples));

    const TiledScores tiled(scores, n, n_components);
    const std::int64_t padded = tiled.n_tiles() * kTile;  // row length of the chunk's means
    std::vector<std::vector<std::int64_t>> thread_counts(
        static_cast<std::size_t>(threads), std::vector<std::int64_t>(static_cast<std::size_t>(n_components), 0));
    // Each thread takes its subsamples in chunks: draw the rows of up to kChunk subsamples (fewer
    // once they hold kChunkRows rows), average every tile over all of them, then apply the rule.
    run_blocks(n_subsamples, static_cast<int>(threads), [&](int t, std::int64_t begin, std::int64_t end) {
        std::int64_t* counts = thread_counts[static_cast<std::size_t>(t)].data();
        std::vector<std::int64_t> rows(static_cast<std::size_t>(scheme == Scheme::kPoisson ? n : m));
        std::vector<std::int64_t> perm;
        std::vector<std::int64_t> swaps;
        if (scheme == Scheme::kWithoutReplacement) {
            perm.resize(static_cast<std::size_t>(n));
            swaps.resize(static_cast<std::size_t>(m));
            for (std::int64_t i = 0; i < n; ++i) {
                perm[static_cast<std::size_t>(i)] = i;
            }
        }
        std::vector<std::int64_t> offsets;  // rows of the chunk's subsamples (times kTile), concatenated
        const std::int64_t max_chunk = std::min(kChunk, end - begin);  // buffers sized by this thread's work
        std::vector<std::int64_t> starts(static_cast<std::size_t>(max_chunk + 1));
        std::vector<double> means(static_cast<std::size_t>(max_chunk * padded));
        Selector select(rule, n_components);
        for (std::int64_t first = begin; first < end;) {
            offsets.clear();
            std::int64_t chunk = 0;
            for (; chunk < max_chunk && first + chunk < end &&
                   static_cast<std::int64_t>(offsets.size()) < kChunkRows;
                 ++chunk) {
                const std::uint64_t key = stream_key(seed, static_cast<std::uint64_t>(first + chunk));
                std::int64_t size = m;
                switch (scheme) {
                    case Scheme::kWithoutReplacement:
                        draw_without_replacement(key, n, m, perm.data(), swaps.data(), rows.data());
                        break;
                    case Scheme::kWithReplacement:
                        draw_with_replacement(key, n, m, rows.data());
                        break;
                    case Scheme::kPoisson:
                        size = draw_poisson(key, n, keep_prob, rows.data());
                        break;
                }
                starts[static_cast<std::size_t>(chunk)] = static_cast<std::int64_t>(offsets.size());
                for (std::int64_t i = 0; i < size; ++i) {
                    offsets.push_back(rows[static_cast<std::size_t>(i)] * kTile);
                }
            }
            starts[static_cast<std::size_t>(chunk)] = static_cast<std::int64_t>(offsets.size());
            for (std::int64_t tile = 0; tile < tiled.n_tiles(); ++tile) {
                for (std::int64_t s = 0; s < chunk; ++s) {
                    const std::int64_t start = starts[static_cast<std::size_t>(s)];
                    const std::int64_t size = starts[static_cast<std::size_t>(s + 1)] - start;
                    if (size > 0) {
                        tile_means(tiled.tile(tile), offsets.data() + start, size,
                                   means.data() + s * padded + tile * kTile);
                    }
                }
            }
            for (std::int64_t s = 0; s < chunk; ++s) {
                if (starts[static_cast<std::size_t>(s + 1)] > starts[static_cast<std::size_t>(s)]) {
                    select(means.data() + s * padded, [counts](std::int64_t j) { ++counts[j]; });
                }  // an empty subsample includes nothing
            }
            first += chunk;
        }
    });
    std::fill(total, total + n_components, 0);
    for (const auto& counts : thread_counts) {
        for (std::int64_t j = 0; j < n_components; ++j) {
            total[j] += counts[static_cast<std::size_t>(j)];
        }
    }
}

// selected[p * N + j]: whether the rule applied to the mean score of part p
// (rows i with part[i] == p, summed in increasing i from 0.0) selects j; an
// empty part selects nothing.
inline void partition_votes(const double* data, std::int64_t n, std::int64_t n_components, const std::int64_t* part,
                            std::int64_t n_parts, const Rule& rule, bool* selected) {
    // Sums of every part, rows added in increasing example index.
    std::vector<double> sums(static_cast<std::size_t>(n_parts * n_components), 0.0);
    std::vector<std::int64_t> sizes(static_cast<std::size_t>(n_parts), 0);
    for (std::int64_t i = 0; i < n; ++i) {
        double* __restrict acc = sums.data() + part[i] * n_components;
        const double* __restrict row = data + i * n_components;
        for (std::int64_t j = 0; j < n_components; ++j) {
            acc[j] += row[j];
        }
        ++sizes[static_cast<std::size_t>(part[i])];
    }
    std::fill(selected, selected + n_parts * n_components, false);
    Selector select(rule, n_components);
    for (std::int64_t p = 0; p < n_parts; ++p) {
        const std::int64_t size = sizes[static_cast<std::size_t>(p)];
        if (size == 0) {
            continue;  // an empty part includes nothing
        }
        double* mean = sums.data() + p * n_components;
        const auto divisor = static_cast<double>(size);
        for (std::int64_t j = 0; j < n_components; ++j) {
            mean[j] /= divisor;
        }
        bool* row = selected + p * n_components;
        select(mean, [row](std::int64_t j) { row[j] = true; });
    }
}

}  // namespace certkit
