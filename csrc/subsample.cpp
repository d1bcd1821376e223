// Bindings of the subsample kernels (black-box use of the subsampling
// certificate: the caller runs its own algorithm on each subsample) as the
// submodule certkit._core.subsample.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>

#include "checks.hpp"
#include "subsample.hpp"

namespace py = pybind11;

namespace certkit {

namespace {

py::array_t<std::int64_t> indices(std::int64_t n, std::int64_t m, std::int64_t n_subsamples, bool replacement,
                                  std::int64_t seed) {
    require(n >= 1, "n (number of examples) must be >= 1, got " + show(n));
    require(m >= 1, "m (subsample size) must be >= 1, got " + show(m));
    require(replacement || m <= n, "m (subsample size) must be <= n when sampling without replacement, got m=" +
                                       show(m) + " > n=" + show(n) + " (pass replacement=True?)");
    require(n_subsamples >= 1, "n_subsamples must be >= 1, got " + show(n_subsamples));
    require(seed >= 0, "seed must be >= 0, got " + show(seed));

    py::array_t<std::int64_t> out({static_cast<py::ssize_t>(n_subsamples), static_cast<py::ssize_t>(m)});
    std::int64_t* data = out.mutable_data();
    {
        py::gil_scoped_release release;
        subsample_indices(static_cast<std::uint64_t>(seed), n, m, n_subsamples, replacement, data);
    }
    return out;
}

py::array_t<bool> masks(std::int64_t n, std::int64_t n_subsamples, double deletion_prob, std::int64_t seed) {
    require(n >= 1, "n (number of examples) must be >= 1, got " + show(n));
    require(!std::isnan(deletion_prob) && deletion_prob >= 0.0 && deletion_prob <= 1.0,
            "deletion_prob must be a probability in [0, 1], got " + show(deletion_prob));
    require(n_subsamples >= 1, "n_subsamples must be >= 1, got " + show(n_subsamples));
    require(seed >= 0, "seed must be >= 0, got " + show(seed));

    py::array_t<bool> out({static_cast<py::ssize_t>(n_subsamples), static_cast<py::ssize_t>(n)});
    bool* data = out.mutable_data();
    {
        py::gil_scoped_release release;
        deletion_masks(static_cast<std::uint64_t>(seed), n, 1.0 - deletion_prob, n_subsamples, data);
    }
    return out;
}

}  // namespace

void register_subsample(py::module_& parent) {
    py::module_ m = parent.def_submodule("subsample", "Subsample indices and Poisson-deletion masks.");
    m.def("indices", &indices, py::arg("n"), py::arg("m"), py::arg("n_subsamples"), py::kw_only(),
          py::arg("replacement") = false, py::arg("seed"),
          "Indices of n_subsamples subsamples of size m from {0, ..., n-1}; int64 array (n_subsamples, m).");
    m.def("deletion_masks", &masks, py::arg("n"), py::arg("n_subsamples"), py::kw_only(),
          py::arg("deletion_prob"), py::arg("seed"),
          "Poisson deletion masks: example i of subsample b is deleted independently with probability "
          "deletion_prob (kept iff uniform01(key_b, i) < 1 - deletion_prob); bool array (n_subsamples, n).");
}

}  // namespace certkit
