// Bindings of the subsample kernels (black-box use of the subsampling
// certificate: the caller runs its own algorithm on each subsample) as the
// submodule certkit._core.subsample.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "checks.hpp"
#include "subsample.hpp"

namespace py = pybind11;

namespace certkit {

namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

py::array_t<std::int64_t> indices(const py::object& n_in, const py::object& m_in, const py::object& n_subsamples_in,
                                  const py::object& replacement_in, const py::object& seed_in) {
    const std::int64_t n = int_arg(n_in, "n (number of examples)", 1, kInt64Max);
    const std::int64_t m = int_arg(m_in, "m (subsample size)", 1, kInt64Max);
    const std::int64_t n_subsamples = int_arg(n_subsamples_in, "n_subsamples", 1, kInt64Max);
    const bool replacement = bool_arg(replacement_in, "replacement");
    const std::int64_t seed = int_arg(seed_in, "seed", 0, kInt64Max);
    require(replacement || m <= n, "m (subsample size) must be <= n when sampling without replacement, got m=" +
                                       show(m) + " > n=" + show(n) + " (pass replacement=True?)");
    require_memory(8.0 * static_cast<double>(n_subsamples) * static_cast<double>(m) + (replacement ? 0.0 : 16.0 * n),
                   "n_subsamples * m = " + show(n_subsamples) + " * " + show(m), "the (n_subsamples, m) index array");

    py::array_t<std::int64_t> out({static_cast<py::ssize_t>(n_subsamples), static_cast<py::ssize_t>(m)});
    std::int64_t* data = out.mutable_data();
    {
        py::gil_scoped_release release;
        subsample_indices(static_cast<std::uint64_t>(seed), n, m, n_subsamples, replacement, data);
    }
    return out;
}

py::array_t<bool> masks(const py::object& n_in, const py::object& n_subsamples_in,
                        const py::object& deletion_prob_in, const py::object& seed_in) {
    const std::int64_t n = int_arg(n_in, "n (number of examples)", 1, kInt64Max);
    const std::int64_t n_subsamples = int_arg(n_subsamples_in, "n_subsamples", 1, kInt64Max);
    const double deletion_prob = real_arg(deletion_prob_in, "deletion_prob");
    const std::int64_t seed = int_arg(seed_in, "seed", 0, kInt64Max);
    require(!std::isnan(deletion_prob) && deletion_prob >= 0.0 && deletion_prob <= 1.0,
            "deletion_prob must be a probability in [0, 1], got " + show(deletion_prob));
    require_memory(static_cast<double>(n_subsamples) * static_cast<double>(n),
                   "n_subsamples * n = " + show(n_subsamples) + " * " + show(n), "the (n_subsamples, n) mask array");

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
