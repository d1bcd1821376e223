// Bindings of the vote kernels (votes.hpp) as the submodule certkit._core.votes:
// argument checks (ValueError naming the argument), then the kernel without
// the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "checks.hpp"
#include "votes.hpp"

namespace py = pybind11;

namespace certkit {

namespace {

using ScoresArray = py::array_t<double, py::array::c_style | py::array::forcecast>;

Rule parse_rule(const std::optional<std::int64_t>& top_k, const std::optional<double>& threshold,
                std::int64_t n_components) {
    require(top_k.has_value() != threshold.has_value(),
            "give exactly one of top_k and threshold (got " + std::string(top_k ? "both" : "neither") + ")");
    Rule rule;
    if (top_k) {
        require(*top_k >= 1 && *top_k <= n_components,
                "top_k must be in [1, N] with N = " + show(n_components) + " components, got " + show(*top_k));
        rule.top_k = true;
        rule.k = *top_k;
    } else {
        require(!std::isnan(*threshold), "threshold must not be NaN");
        rule.threshold = *threshold;
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

py::array_t<std::int64_t> subsample(const ScoresArray& scores_in, const std::string& scheme_name,
                                    std::optional<std::int64_t> m, std::optional<double> deletion_prob,
                                    std::int64_t n_subsamples, std::optional<std::int64_t> top_k,
                                    std::optional<double> threshold, std::int64_t seed, std::int64_t n_threads) {
    const Scheme scheme = parse_scheme(scheme_name);
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
        require(!deletion_prob.has_value(),
                "deletion_prob is only used with scheme='poisson', not with scheme='" + scheme_name + "'");
        require(m.has_value(), "m (subsample size) is required for scheme='" + scheme_name + "'");
        size = *m;
        require(size >= 1, "m (subsample size) must be >= 1, got " + show(size));
        require(scheme == Scheme::kWithReplacement || size <= n,
                "m (subsample size) must be <= n = " + show(n) +
                    " (number of score rows) when sampling without replacement, got " + show(size));
    }
    require(n_subsamples >= 1, "n_subsamples must be >= 1, got " + show(n_subsamples));
    require(seed >= 0, "seed must be >= 0, got " + show(seed));
    require(n_threads >= 0, "n_threads must be >= 0 (0: all hardware threads), got " + show(n_threads));

    py::array_t<std::int64_t> out(static_cast<py::ssize_t>(n_components));
    std::int64_t* counts = out.mutable_data();
    {
        py::gil_scoped_release release;
        subsample_votes(scores.data(), n, n_components, scheme, size, keep_prob, n_subsamples, rule,
                        static_cast<std::uint64_t>(seed), n_threads, counts);
    }
    return out;
}

py::array_t<bool> partition(const ScoresArray& scores_in, std::int64_t n_parts,
                            const py::array_t<std::int64_t, py::array::c_style>& part_of,
                            std::optional<std::int64_t> top_k, std::optional<double> threshold) {
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
