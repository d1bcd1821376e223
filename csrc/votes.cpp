// Vote kernels of the subsampling certificate for circuits (and of its
// partition-aggregation variant, DPA).
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
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "checks.hpp"
#include "subsample.hpp"

namespace py = pybind11;

namespace certkit {

namespace {

using ScoresArray = py::array_t<double, py::array::c_style | py::array::forcecast>;

enum class Scheme { kWithoutReplacement, kWithReplacement, kPoisson };

struct Rule {
    bool top_k = false;
    std::int64_t k = 0;
    double threshold = 0.0;
};

Rule parse_rule(std::int64_t top_k, double threshold, std::int64_t n_components) {
    const bool has_k = top_k != -1;
    const bool has_threshold = !std::isnan(threshold);
    require(has_k != has_threshold, "give exactly one of top_k and threshold (got " +
                                        std::string(has_k ? "both" : "neither") + ")");
    Rule rule;
    if (has_k) {
        require(top_k >= 1 && top_k <= n_components,
                "top_k must be in [1, N] with N = " + show(n_components) + " components, got " + show(top_k));
        rule.top_k = true;
        rule.k = top_k;
    } else {
        rule.threshold = threshold;
    }
    return rule;
}

// Checks the (n, N) score matrix (2-D, non-empty, finite) and returns it.
ScoresArray check_scores(const ScoresArray& scores) {
    require(scores.ndim() == 2, "scores must be a 2-D array (n examples, N components), got a " +
                                    show(scores.ndim()) + "-D array");
    require(scores.shape(0) >= 1 && scores.shape(1) >= 1,
            "scores must be non-empty, got shape (" + show(scores.shape(0)) + ", " + show(scores.shape(1)) + ")");
    const double* data = scores.data();
    const py::ssize_t size = scores.size();
    bool finite = true;
    {
        py::gil_scoped_release release;
        for (py::ssize_t i = 0; i < size; ++i) {
            finite &= std::isfinite(data[i]);
        }
    }
    require(finite, "scores must be finite (found NaN or inf)");
    return scores;
}

// acc[j] = sum over r of scores[rows[r], j], added from 0.0 in the order of
// `rows`.  Four rows are added per pass over the columns; the expression keeps
// the sequential order of additions for every column, so the result is the
// same as adding one row at a time, with fewer loads and stores of acc.
void gather_sum(const double* scores, std::int64_t n_components, const std::int64_t* rows, std::int64_t count,
                double* __restrict acc) {
    std::fill(acc, acc + n_components, 0.0);
    std::int64_t r = 0;
    for (; r + 4 <= count; r += 4) {
        const double* __restrict a = scores + rows[r] * n_components;
        const double* __restrict b = scores + rows[r + 1] * n_components;
        const double* __restrict c = scores + rows[r + 2] * n_components;
        const double* __restrict d = scores + rows[r + 3] * n_components;
        for (std::int64_t j = 0; j < n_components; ++j) {
            acc[j] = (((acc[j] + a[j]) + b[j]) + c[j]) + d[j];
        }
    }
    for (; r < count; ++r) {
        const double* __restrict a = scores + rows[r] * n_components;
        for (std::int64_t j = 0; j < n_components; ++j) {
            acc[j] += a[j];
        }
    }
}

// Applies the rule to the means in `mean` and writes selected[j] (0/1) through
// `mark(j)`.  `order` is scratch holding any permutation of 0..N-1.
template <class Mark>
void select(const Rule& rule, const double* mean, std::int64_t n_components, std::int64_t* order, Mark&& mark) {
    if (!rule.top_k) {
        for (std::int64_t j = 0; j < n_components; ++j) {
            if (mean[j] >= rule.threshold) {
                mark(j);
            }
        }
        return;
    }
    if (rule.k < n_components) {
        // Strict total order (scores are finite, so means are never NaN): the
        // first k entries after nth_element are exactly the top-k set.
        std::nth_element(order, order + rule.k, order + n_components, [mean](std::int64_t x, std::int64_t y) {
            return mean[x] > mean[y] || (mean[x] == mean[y] && x < y);
        });
    }
    for (std::int64_t i = 0; i < rule.k; ++i) {
        mark(order[i]);
    }
}

// Runs fn(thread_index, begin, end) on n_threads contiguous blocks of
// [0, total); joins every started thread even if starting another fails.
template <class Fn>
void run_blocks(std::int64_t total, int n_threads, Fn&& fn) {
    if (n_threads == 1) {
        fn(0, std::int64_t{0}, total);
        return;
    }
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(n_threads));
    std::exception_ptr error;
    try {
        for (int t = 0; t < n_threads; ++t) {
            const std::int64_t begin = total * t / n_threads;
            const std::int64_t end = total * (t + 1) / n_threads;
            threads.emplace_back([&fn, t, begin, end] { fn(t, begin, end); });
        }
    } catch (...) {
        error = std::current_exception();
    }
    for (auto& thread : threads) {
        thread.join();
    }
    if (error) {
        std::rethrow_exception(error);
    }
}

Scheme parse_scheme(const std::string& scheme) {
    if (scheme == "without_replacement") {
        return Scheme::kWithoutReplacement;
    }
    if (scheme == "with_replacement") {
        return Scheme::kWithReplacement;
    }
    if (scheme == "poisson") {
        return Scheme::kPoisson;
    }
    throw py::value_error("scheme must be one of 'without_replacement', 'with_replacement', 'poisson', got '" +
                          scheme + "'");
}

py::array_t<std::int64_t> subsample_votes(const ScoresArray& scores_in, const std::string& scheme_name, std::int64_t m,
                                          double keep_prob, std::int64_t n_subsamples, std::int64_t top_k,
                                          double threshold, std::int64_t seed, std::int64_t n_threads) {
    const Scheme scheme = parse_scheme(scheme_name);
    const ScoresArray scores = check_scores(scores_in);
    const std::int64_t n = scores.shape(0);
    const std::int64_t n_components = scores.shape(1);
    const Rule rule = parse_rule(top_k, threshold, n_components);
    if (scheme == Scheme::kPoisson) {
        require(!std::isnan(keep_prob) && keep_prob >= 0.0 && keep_prob <= 1.0,
                "keep_prob must be a probability in [0, 1] for scheme='poisson', got " + show(keep_prob));
        require(m == 0, "m is not used with scheme='poisson' (the subsample size is random); leave it at 0, got " +
                            show(m));
    } else {
        require(std::isnan(keep_prob), "keep_prob is only used with scheme='poisson'; leave it unset for scheme='" +
                                           scheme_name + "'");
        require(m >= 1, "m (subsample size) must be >= 1, got " + show(m));
        require(scheme == Scheme::kWithReplacement || m <= n,
                "m (subsample size) must be <= n = " + show(n) +
                    " (number of score rows) when sampling without replacement, got " + show(m));
    }
    require(n_subsamples >= 1, "n_subsamples must be >= 1, got " + show(n_subsamples));
    require(seed >= 0, "seed must be >= 0, got " + show(seed));
    require(n_threads >= 0, "n_threads must be >= 0 (0: all hardware threads), got " + show(n_threads));

    std::int64_t threads = n_threads;
    if (threads == 0) {
        threads = std::max<std::int64_t>(1, std::thread::hardware_concurrency());
    }
    threads = std::min(threads, n_subsamples);

    py::array_t<std::int64_t> out(static_cast<py::ssize_t>(n_components));
    std::int64_t* total = out.mutable_data();
    const double* data = scores.data();
    {
        py::gil_scoped_release release;
        const auto useed = static_cast<std::uint64_t>(seed);
        const auto row_capacity = static_cast<std::size_t>(scheme == Scheme::kPoisson ? n : m);
        std::vector<std::vector<std::int64_t>> thread_counts(
            static_cast<std::size_t>(threads), std::vector<std::int64_t>(static_cast<std::size_t>(n_components), 0));
        run_blocks(n_subsamples, static_cast<int>(threads), [&](int t, std::int64_t begin, std::int64_t end) {
            std::vector<std::int64_t>& counts = thread_counts[static_cast<std::size_t>(t)];
            std::vector<std::int64_t> rows(row_capacity);
            std::vector<std::int64_t> perm;
            std::vector<std::int64_t> swaps;
            if (scheme == Scheme::kWithoutReplacement) {
                perm.resize(static_cast<std::size_t>(n));
                swaps.resize(static_cast<std::size_t>(m));
                for (std::int64_t i = 0; i < n; ++i) {
                    perm[static_cast<std::size_t>(i)] = i;
                }
            }
            std::vector<double> mean(static_cast<std::size_t>(n_components));
            std::vector<std::int64_t> order(static_cast<std::size_t>(n_components));
            for (std::int64_t j = 0; j < n_components; ++j) {
                order[static_cast<std::size_t>(j)] = j;
            }
            std::int64_t* count_data = counts.data();
            for (std::int64_t b = begin; b < end; ++b) {
                const std::uint64_t key = stream_key(useed, static_cast<std::uint64_t>(b));
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
                if (size == 0) {
                    continue;  // an empty subsample includes nothing
                }
                gather_sum(data, n_components, rows.data(), size, mean.data());
                const auto divisor = static_cast<double>(size);
                for (std::int64_t j = 0; j < n_components; ++j) {
                    mean[static_cast<std::size_t>(j)] /= divisor;
                }
                select(rule, mean.data(), n_components, order.data(), [count_data](std::int64_t j) { ++count_data[j]; });
            }
        });
        std::fill(total, total + n_components, 0);
        for (const auto& counts : thread_counts) {
            for (std::int64_t j = 0; j < n_components; ++j) {
                total[j] += counts[static_cast<std::size_t>(j)];
            }
        }
    }
    return out;
}

py::array_t<bool> partition_votes(const ScoresArray& scores_in, std::int64_t n_parts,
                                  const py::array_t<std::int64_t, py::array::c_style>& part_of,
                                  std::int64_t top_k, double threshold) {
    const ScoresArray scores = check_scores(scores_in);
    const std::int64_t n = scores.shape(0);
    const std::int64_t n_components = scores.shape(1);
    const Rule rule = parse_rule(top_k, threshold, n_components);
    require(n_parts >= 1, "n_parts must be >= 1, got " + show(n_parts));
    require(part_of.ndim() == 1 && part_of.shape(0) == n,
            "part_of must be a 1-D array with one part label per score row (length " + show(n) + ")");
    const std::int64_t* part = part_of.data();
    for (std::int64_t i = 0; i < n; ++i) {
        require(part[i] >= 0 && part[i] < n_parts, "part_of must hold part labels in [0, n_parts) = [0, " +
                                                       show(n_parts) + "), got " + show(part[i]) + " at index " +
                                                       show(i));
    }

    py::array_t<bool> out({static_cast<py::ssize_t>(n_parts), static_cast<py::ssize_t>(n_components)});
    bool* selected = out.mutable_data();
    const double* data = scores.data();
    {
        py::gil_scoped_release release;
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
        std::vector<std::int64_t> order(static_cast<std::size_t>(n_components));
        for (std::int64_t j = 0; j < n_components; ++j) {
            order[static_cast<std::size_t>(j)] = j;
        }
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
            select(rule, mean, n_components, order.data(), [row](std::int64_t j) { row[j] = true; });
        }
    }
    return out;
}

}  // namespace

void register_votes(py::module_& m) {
    m.def("subsample_votes", &subsample_votes, py::arg("scores"), py::kw_only(),
          py::arg("scheme") = "without_replacement", py::arg("m") = 0,
          py::arg("keep_prob") = std::numeric_limits<double>::quiet_NaN(), py::arg("n_subsamples"),
          py::arg("top_k") = -1, py::arg("threshold") = std::numeric_limits<double>::quiet_NaN(), py::arg("seed"),
          py::arg("n_threads") = 1,
          "Per-component inclusion counts over n_subsamples subsamples of the score rows; int64 array (N,).");
    m.def("partition_votes", &partition_votes, py::arg("scores"), py::arg("n_parts"), py::arg("part_of"),
          py::kw_only(), py::arg("top_k") = -1, py::arg("threshold") = std::numeric_limits<double>::quiet_NaN(),
          "Decision rule applied to the mean score of each part (partition aggregation); bool array (n_parts, N).");
}

}  // namespace certkit
