// Bindings of the counter-based generator (rng.hpp) as the submodule
// certkit._core.rng (used by tests and by Python code that must reproduce
// kernel draws).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>

#include "checks.hpp"
#include "rng.hpp"

namespace py = pybind11;

namespace certkit {

namespace {

py::array_t<std::uint64_t> random_uint64(const py::object& seed_in, const py::object& stream_in,
                                         const py::object& counters_in) {
    const std::uint64_t seed = uint64_arg(seed_in, "seed");
    const std::uint64_t stream = uint64_arg(stream_in, "stream");
    const py::array raw = integer_array_arg(counters_in, "counters");
    if (raw.dtype().kind() == 'i') {
        const auto signed_counters = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(raw);
        const std::int64_t* data = signed_counters.data();
        for (py::ssize_t i = 0; i < signed_counters.size(); ++i) {
            if (data[i] < 0) {  // the message is only formatted for a bad counter
                throw py::value_error("counters must be >= 0, got " + show(data[i]) + " at index " + show(i));
            }
        }
    }
    const auto counters = py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>::ensure(raw);
    auto in = counters.unchecked<1>();
    py::array_t<std::uint64_t> out(in.shape(0));
    auto o = out.mutable_unchecked<1>();
    const std::uint64_t key = stream_key(seed, stream);
    {
        py::gil_scoped_release release;
        for (py::ssize_t i = 0; i < in.shape(0); ++i) {
            o(i) = draw64(key, in(i));
        }
    }
    return out;
}

}  // namespace

void register_rng(py::module_& parent) {
    py::module_ m = parent.def_submodule("rng", "The counter-based generator keyed by (seed, stream).");
    m.def("random_uint64", &random_uint64, py::arg("seed"), py::arg("stream"), py::arg("counters"),
          "Raw 64-bit draws of the counter-based generator keyed by (seed, stream) at the given counters.");
}

}  // namespace certkit
