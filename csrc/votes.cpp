// Bindings of the vote kernels (votes.hpp) as the submodule certkit._core.votes:
// argument checks (ValueError naming the argument), then the kernel without
// the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <thread>

#include "checks.hpp"
#include "votes.hpp"

namespace py = pybind11;

namespace certkit {

namespace {

using ScoresArray = py::array_t<double, py::array::c_style | py::array::forcecast>;

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
// Largest n_threads accepted; the kernel uses at most the hardware threads anyway.
constexpr std::int64_t kMaxThreads = 1024;
// Largest number of score additions one subsample vote call may do (about an hour of one core).  Unlike
// the other kernels, whose work is bounded by the memory they allocate (checked by require_memory), this
// one keeps only per-component counts, so n_subsamples alone could make it run for days.
constexpr double kMaxWork = 1e13;

// ValueError naming `name` and the estimate when `operations` exceeds kMaxWork.
void require_work(double operations, const std::string& name, const std::string& what) {
    if (operations > kMaxWork) {
        throw py::value_error(name + " is too large: " + what + " would do about " + show_real(operations, 3) +
                              " score additions (more than " + show_real(kMaxWork, 3) +
                              ", hours of computing); reduce it");
    }
}

Rule parse_rule(const py::object& top_k_in, const py::object& threshold_in, std::int64_t n_components) {
    const std::optional<std::int64_t> top_k = optional_int_arg(top_k_in, "top_k", std::numeric_limits<std::int64_t>::min(), kInt64Max);
    const std::optional<double> threshold = optional_real_arg(threshold_in, "threshold");
    require(top_k.has_value() != threshold.has_value(),
            "give exactly one of top_k and threshold (got " + std::string(top_k ? "both" : "neither") + ")");
    Rule rule;
    if (top_k) {
        require(*top_k >= 1 && *top_k <= n_components,
                "top_k must be in [1, N] with N = " + show(n_components) + " components, got " + show(*top_k));
        rule.top_k = true;
        rule.k = *top_k;
    } else {
        require(std::isfinite(*threshold), "threshold must be finite (not NaN or inf), got " + show(*threshold));
        rule.threshold = *threshold;
    }
    return rule;
}

// Checks the (n, N) score matrix (real dtype, 2-D, non-empty, finite) and returns it as float64.
ScoresArray check_scores(const py::object& scores_in) {
    const ScoresArray scores = real_array_arg(scores_in, "scores");
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

Scheme parse_scheme(const py::object& scheme_in) {
    if (!py::isinstance<py::str>(scheme_in)) {
        throw py::type_error("scheme must be a str, got " + type_name(scheme_in));
    }
    const std::string scheme = scheme_in.cast<std::string>();
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

py::array_t<std::int64_t> subsample(const py::object& scores_in, const py::object& scheme_name,
                                    const py::object& m_in, const py::object& deletion_prob_in,
                                    const py::object& n_subsamples_in, const py::object& top_k,
                                    const py::object& threshold, const py::object& seed_in,
                                    const py::object& n_threads_in) {
    const Scheme scheme = parse_scheme(scheme_name);
    const std::optional<std::int64_t> m = optional_int_arg(m_in, "m (subsample size)", 1, kInt64Max);
    const std::optional<double> deletion_prob = optional_real_arg(deletion_prob_in, "deletion_prob");
    const std::int64_t n_subsamples = int_arg(n_subsamples_in, "n_subsamples", 1, kInt64Max);
    const std::int64_t seed = int_arg(seed_in, "seed", 0, kInt64Max);
    const std::int64_t n_threads = int_arg(n_threads_in, "n_threads", 0, kMaxThreads);
    const ScoresArray scores = check_scores(scores_in);
    const std::int64_t n = scores.shape(0);
    const std::int64_t n_components = scores.shape(1);
    const Rule rule = parse_rule(top_k, threshold, n_components);
    double keep_prob = 1.0;
    std::int64_t size = 0;
    if (scheme == Scheme::kPoisson) {
        require(deletion_prob.has_value(), "deletion_prob is required for scheme='poisson'");
        require(!std::isnan(*deletion_prob) && *deletion_prob >= 0.0 && *deletion_prob <= 1.0,
                "deletion_prob must be a probability in [0, 1] for scheme='poisson', got " + show(*deletion_prob));
        require(!m.has_value(), "m is not used with scheme='poisson' (the subsample size is random)");
        keep_prob = 1.0 - *deletion_prob;
    } else {
        const std::string name = scheme_name.cast<std::string>();
        require(!deletion_prob.has_value(),
                "deletion_prob is only used with scheme='poisson', not with scheme='" + name + "'");
        require(m.has_value(), "m (subsample size) is required for scheme='" + name + "'");
        size = *m;
        require(scheme == Scheme::kWithReplacement || size <= n,
                "m (subsample size) must be <= n = " + show(n) +
                    " (number of score rows) when sampling without replacement, got " + show(size));
    }
    // Memory: the tiled copy of the scores, then per thread its counts, chunk means, rows and offsets.
    const double hardware = std::max(1u, std::thread::hardware_concurrency());
    const double threads = std::min({n_threads == 0 ? hardware : std::min<double>(n_threads, hardware),
                                     static_cast<double>(n_subsamples)});
    const double padded = std::ceil(n_components / 32.0) * 32.0;
    const double rows = scheme == Scheme::kPoisson ? n : static_cast<double>(size);
    const double per_thread = 8.0 * (3.0 * n_components + std::min(64.0, std::ceil(n_subsamples / threads)) * padded +
                                     3.0 * rows + n + 65536.0);
    require_memory(8.0 * n * padded + threads * per_thread,
                   scheme == Scheme::kPoisson ? "scores" : "m=" + show(size),
                   "the subsample vote kernel");
    // Work: every subsample adds its rows' padded score tiles, then ranks or thresholds N means; a Poisson
    // subsample draws n coins and keeps (1 - deletion_prob) n rows on average.
    const double added_rows = scheme == Scheme::kPoisson ? keep_prob * n : rows;
    const double draws = scheme == Scheme::kPoisson ? static_cast<double>(n) : 0.0;
    require_work(static_cast<double>(n_subsamples) * (draws + added_rows * padded + 2.0 * n_components),
                 "n_subsamples=" + show(n_subsamples), "the subsample vote kernel");

    py::array_t<std::int64_t> out(static_cast<py::ssize_t>(n_components));
    std::int64_t* counts = out.mutable_data();
    {
        py::gil_scoped_release release;
        subsample_votes(scores.data(), n, n_components, scheme, size, keep_prob, n_subsamples, rule,
                        static_cast<std::uint64_t>(seed), n_threads, counts);
    }
    return out;
}

py::array_t<bool> partition(const py::object& scores_in, const py::object& n_parts_in,
                            const py::object& part_of_in, const py::object& top_k,
                            const py::object& threshold) {
    const std::int64_t n_parts = int_arg(n_parts_in, "n_parts", 1, kInt64Max);
    const ScoresArray scores = check_scores(scores_in);
    const std::int64_t n = scores.shape(0);
    const std::int64_t n_components = scores.shape(1);
    const Rule rule = parse_rule(top_k, threshold, n_components);
    const auto part_of = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(
        integer_array_arg(part_of_in, "part_of"));
    require(part_of.shape(0) == n,
            "part_of must be a 1-D array with one part label per score row (length " + show(n) + "), got length " +
                show(part_of.shape(0)));
    const std::int64_t* part = part_of.data();
    for (std::int64_t i = 0; i < n; ++i) {
        if (part[i] < 0 || part[i] >= n_parts) {  // the message is only formatted for a bad label
            throw py::value_error("part_of must hold part labels in [0, n_parts) = [0, " + show(n_parts) +
                                  "), got " + show(part[i]) + " at index " + show(i));
        }
    }
    // Memory: the (n_parts, N) selection, per-part sums and sizes.
    require_memory(9.0 * static_cast<double>(n_parts) * n_components + 8.0 * n_parts,
                   "n_parts=" + show(n_parts), "the partition vote kernel");

    py::array_t<bool> out({static_cast<py::ssize_t>(n_parts), static_cast<py::ssize_t>(n_components)});
    bool* selected = out.mutable_data();
    {
        py::gil_scoped_release release;
        partition_votes(scores.data(), n, n_components, part, n_parts, rule, selected);
    }
    return out;
}

}  // namespace

void register_votes(py::module_& parent) {
    py::module_ m = parent.def_submodule("votes", "Vote kernels of the circuit certificates (subsampling and DPA).");
    m.def("subsample", &subsample, py::arg("scores"), py::kw_only(), py::arg("scheme") = "without_replacement",
          py::arg("m") = py::none(), py::arg("deletion_prob") = py::none(), py::arg("n_subsamples"),
          py::arg("top_k") = py::none(), py::arg("threshold") = py::none(), py::arg("seed"),
          py::arg("n_threads") = 1,
          "Per-component inclusion counts over n_subsamples subsamples of the score rows; int64 array (N,).");
    m.def("partition", &partition, py::arg("scores"), py::arg("n_parts"), py::arg("part_of"), py::kw_only(),
          py::arg("top_k") = py::none(), py::arg("threshold") = py::none(),
          "Decision rule applied to the mean score of each part (partition aggregation); bool array (n_parts, N).");
}

}  // namespace certkit
