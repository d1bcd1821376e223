// certkit._core: compiled kernels.  Each domain has its kernels in
// <domain>.hpp and its binding unit <domain>.cpp, whose register_<domain>
// creates the submodule certkit._core.<domain>; this file only lists them.
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace certkit {
void register_mixreg(py::module_& parent);
void register_rng(py::module_& m);
void register_subsample(py::module_& m);
void register_votes(py::module_& m);
}  // namespace certkit

PYBIND11_MODULE(_core, m) {
    m.doc() = "certkit compiled kernels (C++17).";
    certkit::register_mixreg(m);
    certkit::register_rng(m);
    certkit::register_subsample(m);
    certkit::register_votes(m);
}
