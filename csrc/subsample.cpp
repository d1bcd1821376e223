// Subsample index and deletion-mask kernels (black-box use of the subsampling
// certificate: the caller runs its own algorithm on each subsample).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "checks.hpp"
#include "subsample.hpp"

namespace py = pybind11;

namespace certkit {

namespace {

py::array_t<std::int64_t> subsample_indices(std::int64_t n, std::int64_t m, std::int64_t n_subsamples, bool replace,
                                            std::int64_t seed) {
    require(n >= 1, "n (number of examples) must be >= 1, got " + show(n));
    require(m >= 1, "m (subsample size) must be >= 1, got " + show(m));
    require(replace || m <= n, "m (subsample size) must be <= n when sampling without replacement, got m=" +
                                   show(m) + " > n=" + show(n) + " (pass replace=True?)");
    require(n_subsamples >= 1, "n_subsamples must be >= 1, got " + show(n_subsamples));
    require(seed >= 0, "seed must be >= 0, got " + show(seed));

    py::array_t<std::int64_t> out({static_cast<py::ssize_t>(n_subsamples), static_cast<py::ssize_t>(m)});
    std::int64_t* data = out.mutable_data();
    {
        py::gil_scoped_release release;
        const auto useed = static_cast<std::uint64_t>(seed);
        if (replace) {
            for (std::int64_t b = 0; b < n_subsamples; ++b) {
                draw_with_replacement(stream_key(useed, static_cast<std::uint64_t>(b)), n, m, data + b * m);
            }
        } else {
            std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
            std::vector<std::int64_t> swaps(static_cast<std::size_t>(m));
            for (std::int64_t i = 0; i < n; ++i) {
                perm[static_cast<std::size_t>(i)] = i;
            }
            for (std::int64_t b = 0; b < n_subsamples; ++b) {
                draw_without_replacement(stream_key(useed, static_cast<std::uint64_t>(b)), n, m, perm.data(),
                                         swaps.data(), data + b * m);
            }
        }
    }
    return out;
}

py::array_t<bool> deletion_masks(std::int64_t n, double keep_prob, std::int64_t n_subsamples, std::int64_t seed) {
    require(n >= 1, "n (number of examples) must be >= 1, got " + show(n));
    require(!std::isnan(keep_prob) && keep_prob >= 0.0 && keep_prob <= 1.0,
            "keep_prob must be a probability in [0, 1], got " + show(keep_prob));
    require(n_subsamples >= 1, "n_subsamples must be >= 1, got " + show(n_subsamples));
    require(seed >= 0, "seed must be >= 0, got " + show(seed));

    py::array_t<bool> out({static_cast<py::ssize_t>(n_subsamples), static_cast<py::ssize_t>(n)});
    bool* data = out.mutable_data();
    {
        py::gil_scoped_release release;
        const auto useed = static_cast<std::uint64_t>(seed);
        for (std::int64_t b = 0; b < n_subsamples; ++b) {
            const std::uint64_t key = stream_key(useed, static_cast<std::uint64_t>(b));
            bool* row = data + b * n;
            for (std::int64_t i = 0; i < n; ++i) {
                row[i] = uniform01(key, static_cast<std::uint64_t>(i)) < keep_prob;
            }
        }
    }
    return out;
}

}  // namespace

void register_subsample(py::module_& m) {
    m.def("subsample_indices", &subsample_indices, py::arg("n"), py::arg("m"), py::arg("n_subsamples"),
          py::arg("replace"), py::arg("seed"),
          "Indices of n_subsamples subsamples of size m from {0, ..., n-1}; int64 array (n_subsamples, m).");
    m.def("deletion_masks", &deletion_masks, py::arg("n"), py::arg("keep_prob"), py::arg("n_subsamples"),
          py::arg("seed"),
          "Poisson deletion masks: example i of subsample b is kept independently with probability keep_prob; "
          "bool array (n_subsamples, n).");
}

}  // namespace certkit
