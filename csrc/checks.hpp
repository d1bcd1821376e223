// Argument checks shared by the binding units: every violation raises a Python
// ValueError whose message names the argument and what was expected.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <type_traits>

namespace certkit {

inline void require(bool ok, const std::string& message) {
    if (!ok) {
        throw pybind11::value_error(message);
    }
}

// Text of a number for an error message: integers in full, reals in %g form (6 significant digits),
// or `digits` significant digits.  printf-style, not iostreams: no locale objects are touched, so the
// messages work however the C++ runtime is linked (a toolchain that links libstdc++ statically into the
// module crashed in std::ostringstream when another libstdc++ was loaded in the process).
inline std::string show_real(double value, int digits = 6) {
    char text[64];
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    return text;
}

template <class T>
std::string show(T value) {
    if constexpr (std::is_integral_v<T>) {
        return std::to_string(value);
    } else {
        return show_real(static_cast<double>(value));
    }
}


// ---------------------------------------------------------------------------------------------------------
// Arguments taken as Python objects and checked here, so that a wrong type or an out-of-range value is a
// TypeError / ValueError naming the argument (pybind11's own conversion would coerce None, 1 or 0.0 to a
// bool, parse strings into arrays and answer "incompatible function arguments" for 2**63).

inline std::string type_name(const pybind11::handle& value) {
    return Py_TYPE(value.ptr())->tp_name;
}

inline bool is_instance_of_numpy(const pybind11::handle& value, const char* type) {
    return pybind11::isinstance(value, pybind11::module_::import("numpy").attr(type));
}

inline bool is_bool_like(const pybind11::handle& value) {
    return PyBool_Check(value.ptr()) || is_instance_of_numpy(value, "bool_");
}

// A Python int or NumPy integer as a Python int (bools, floats and strings are TypeErrors).
inline pybind11::object integer_object(const pybind11::handle& value, const char* name) {
    PyObject* obj = value.ptr();
    if (is_bool_like(value) || PyFloat_Check(obj) || !PyIndex_Check(obj)) {
        throw pybind11::type_error(std::string(name) + " must be an integer, got " + type_name(value));
    }
    pybind11::object index = pybind11::reinterpret_steal<pybind11::object>(PyNumber_Index(obj));
    if (!index) {
        throw pybind11::error_already_set();
    }
    return index;
}

// A Python int or NumPy integer in [lo, hi] (bools, floats and strings are TypeErrors).
inline std::int64_t int_arg(const pybind11::handle& value, const char* name, std::int64_t lo, std::int64_t hi) {
    const pybind11::object index = integer_object(value, name);
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if ((overflow < 0 || (overflow == 0 && v < lo))) {
        throw pybind11::value_error(std::string(name) + " must be >= " + show(lo) + ", got " +
                                    pybind11::repr(index).cast<std::string>());
    }
    if (overflow > 0 || v > hi) {
        throw pybind11::value_error(std::string(name) + " must be <= " + show(hi) + ", got " +
                                    pybind11::repr(index).cast<std::string>());
    }
    return static_cast<std::int64_t>(v);
}

inline std::optional<std::int64_t> optional_int_arg(const pybind11::handle& value, const char* name,
                                                    std::int64_t lo, std::int64_t hi) {
    if (value.is_none()) {
        return std::nullopt;
    }
    return int_arg(value, name, lo, hi);
}

// A Python int or NumPy integer in [0, 2**64) (seeds and streams of the raw generator).
inline std::uint64_t uint64_arg(const pybind11::handle& value, const char* name) {
    const pybind11::object index = integer_object(value, name);
    const unsigned long long v = PyLong_AsUnsignedLongLong(index.ptr());
    if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
        PyErr_Clear();
        throw pybind11::value_error(std::string(name) + " must be an integer in [0, 2**64 - 1], got " +
                                    pybind11::repr(index).cast<std::string>());
    }
    return static_cast<std::uint64_t>(v);
}

// A real number: a Python int/float or a NumPy integer/floating scalar (bools, complex and strings rejected).
inline double real_arg(const pybind11::handle& value, const char* name) {
    PyObject* obj = value.ptr();
    const bool real = !is_bool_like(value) &&
                      (PyFloat_Check(obj) || PyLong_Check(obj) || is_instance_of_numpy(value, "integer") ||
                       is_instance_of_numpy(value, "floating"));
    if (!real) {
        throw pybind11::type_error(std::string(name) + " must be a real number, got " + type_name(value));
    }
    const double v = PyFloat_AsDouble(obj);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        throw pybind11::value_error(std::string(name) + " is too large for a float64");
    }
    return v;
}

inline std::optional<double> optional_real_arg(const pybind11::handle& value, const char* name) {
    if (value.is_none()) {
        return std::nullopt;
    }
    return real_arg(value, name);
}

// True or False (a NumPy bool too); 1, 0.0, None or "yes" are TypeErrors.
inline bool bool_arg(const pybind11::handle& value, const char* name) {
    if (!is_bool_like(value)) {
        throw pybind11::type_error(std::string(name) + " must be True or False, got " +
                                   pybind11::repr(value).cast<std::string>());
    }
    return PyObject_IsTrue(value.ptr()) == 1;
}

// An array of real numbers (integer or floating dtype) as C-contiguous float64; bool, complex, string and
// object arrays are TypeErrors (nothing is parsed or truncated).
inline pybind11::array_t<double, pybind11::array::c_style | pybind11::array::forcecast> real_array_arg(
    const pybind11::handle& value, const char* name) {
    pybind11::array arr = pybind11::array::ensure(value);
    if (!arr) {
        PyErr_Clear();
        throw pybind11::type_error(std::string(name) + " must be an array of real numbers, got " + type_name(value));
    }
    const char kind = arr.dtype().kind();
    if (kind != 'f' && kind != 'i' && kind != 'u') {
        throw pybind11::type_error(std::string(name) + " must be an array of real numbers (integer or float dtype), got dtype " +
                                   pybind11::str(arr.dtype()).cast<std::string>());
    }
    return pybind11::array_t<double, pybind11::array::c_style | pybind11::array::forcecast>::ensure(arr);
}

// A 1-D array of integers (integer dtype only: bool, float, string and object arrays are TypeErrors).
inline pybind11::array integer_array_arg(const pybind11::handle& value, const char* name) {
    pybind11::array arr = pybind11::array::ensure(value);
    if (!arr) {
        PyErr_Clear();
        throw pybind11::type_error(std::string(name) + " must be an array of integers, got " + type_name(value));
    }
    const char kind = arr.dtype().kind();
    if (kind != 'i' && kind != 'u') {
        throw pybind11::type_error(std::string(name) + " must be an array of integers (integer dtype), got dtype " +
                                   pybind11::str(arr.dtype()).cast<std::string>());
    }
    require(arr.ndim() == 1, std::string(name) + " must be a 1-D array, got a " + show(arr.ndim()) + "-D array");
    return arr;
}

// Largest allocation certkit attempts in one call: half the machine's physical memory (the rest is left to
// the OS, the caller and other processes), so hopeless sizes are refused up front instead of swapping.
inline double memory_budget() {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGE_SIZE);
    const double total = pages > 0 && page_size > 0 ? static_cast<double>(pages) * static_cast<double>(page_size)
                                                    : 16.0 * 1073741824.0;
    return total / 2.0;
}

// ValueError naming `name` and the estimate when `bytes` exceeds the memory budget.
inline void require_memory(double bytes, const std::string& name, const std::string& what) {
    const double limit = memory_budget();
    if (bytes > limit) {
        throw pybind11::value_error(name + " is too large: " + what + " would need about " +
                                    show_real(bytes / 1073741824.0, 3) + " GiB, more than half (" +
                                    show_real(limit / 1073741824.0, 3) + " GiB) of this machine's memory");
    }
}

}  // namespace certkit
