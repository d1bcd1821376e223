// Argument checks shared by the binding units: every violation raises a Python
// ValueError whose message names the argument and what was expected.
#pragma once

#include <pybind11/pybind11.h>

#include <sstream>
#include <string>

namespace certkit {

inline void require(bool ok, const std::string& message) {
    if (!ok) {
        throw pybind11::value_error(message);
    }
}

// Shortest round-trippable-ish text for a number in an error message.
template <class T>
std::string show(T value) {
    std::ostringstream text;
    text << value;
    return text.str();
}

}  // namespace certkit
