// Binding of the mixture-of-regressions EM kernel (csrc/mixreg.hpp) as the
// submodule certkit._core.mixreg.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "checks.hpp"
#include "gmm.hpp"
#include "mixjoint.hpp"
#include "mixreg.hpp"

namespace py = pybind11;

namespace certkit {

namespace {

using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;

// Largest magnitude accepted in y and design: squares and sums over samples of their products stay finite.
constexpr double kMaxMagnitude = 1e100;

bool all_bounded(const DoubleArray& values) {
    const double* data = values.data();
    for (py::ssize_t i = 0; i < values.size(); ++i) {
        if (!(std::abs(data[i]) <= kMaxMagnitude)) {
            return false;
        }
    }
    return true;
}

// resp0 (n, K): finite, >= 0, rows summing to 1 within 1e-6.  The messages are formatted only for a
// bad entry (formatting them for every entry cost more than the EM passes of a typical call).
void check_responsibilities(const DoubleArray& resp0, std::int64_t n, std::int64_t K) {
    const double* r0 = resp0.data();
    for (std::int64_t i = 0; i < n; ++i) {
        double total = 0.0;
        for (std::int64_t k = 0; k < K; ++k) {
            const double value = r0[i * K + k];
            if (!(std::isfinite(value) && value >= 0.0)) {
                require(false, "resp0 must hold finite responsibilities >= 0, got " + show(value) + " in row " +
                                   show(i));
            }
            total += value;
        }
        if (!(std::abs(total - 1.0) <= 1e-6)) {
            require(false, "resp0 rows must sum to 1 (responsibilities), row " + show(i) + " sums to " + show(total));
        }
    }
}

py::dict em(const py::object& y_in, const py::object& design_in, const py::object& resp0_in,
            const py::object& max_iter_in, const py::object& tol_in, const py::object& ridge_in,
            const py::object& min_variance_in) {
    // Real dtypes only (bool, complex, string and object arrays are TypeErrors, never cast).
    const DoubleArray y = real_array_arg(y_in, "y");
    const DoubleArray design = real_array_arg(design_in, "design");
    const DoubleArray resp0 = real_array_arg(resp0_in, "resp0");
    const std::int64_t max_iter = int_arg(max_iter_in, "max_iter", 0, std::numeric_limits<std::int64_t>::max());
    const double tol = real_arg(tol_in, "tol");
    const double ridge = real_arg(ridge_in, "ridge");
    const double min_variance = real_arg(min_variance_in, "min_variance");
    require(y.ndim() == 1, "y must be 1-D, got " + show(y.ndim()) + " dimensions");
    require(design.ndim() == 2, "design must be 2-D (n, p), got " + show(design.ndim()) + " dimensions");
    require(resp0.ndim() == 2, "resp0 must be 2-D (n, K), got " + show(resp0.ndim()) + " dimensions");
    const std::int64_t n = y.shape(0), p = design.shape(1), K = resp0.shape(1);
    require(n >= 1, "y must not be empty");
    require(design.shape(0) == n, "design must have one row per entry of y (n = " + show(n) + "), got " +
                                      show(design.shape(0)) + " rows");
    require(resp0.shape(0) == n, "resp0 must have one row per entry of y (n = " + show(n) + "), got " +
                                     show(resp0.shape(0)) + " rows");
    require(p >= 1, "design must have at least one column (the intercept)");
    require(K >= 1, "resp0 must have at least one column (one per component)");
    require(max_iter >= 0, "max_iter must be >= 0, got " + show(max_iter));
    require(std::isfinite(tol) && tol >= 0.0, "tol must be finite and >= 0, got " + show(tol));
    require(std::isfinite(ridge) && ridge >= 0.0, "ridge must be finite and >= 0, got " + show(ridge));
    require(std::isfinite(min_variance) && min_variance > 0.0,
            "min_variance must be finite and > 0, got " + show(min_variance));

    require(all_bounded(y), "y must be finite with magnitudes <= 1e100 (found NaN, inf or a larger value)");
    require(all_bounded(design), "design must be finite with magnitudes <= 1e100 (found NaN, inf or a larger value)");
    check_responsibilities(resp0, n, K);

    py::array_t<double> resp({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(K)});
    mixreg::EmOutput out;
    {
        py::gil_scoped_release release;
        out = mixreg::fit_em(y.data(), design.data(), n, p, K, resp0.data(), resp.mutable_data(), max_iter, tol,
                             ridge, min_variance);
    }
    require(out.ok || !out.singular,
            "the weighted Gram matrix of every component left was singular: design is rank deficient (collinear "
            "columns: a duplicated column, a constant column beside the intercept, a column that is a combination "
            "of others) on the samples of each component; drop or combine the collinear columns of design, or "
            "pass ridge > 0");
    require(out.ok, "every mixture component was retired (fewer than p + 1 effective samples each); "
                    "use fewer components or more samples, and rescale y and design if they hold huge "
                    "values (squares above 1e308 overflow)");
    py::array_t<double> coef({static_cast<py::ssize_t>(K), static_cast<py::ssize_t>(p)});
    std::copy(out.coef.begin(), out.coef.end(), coef.mutable_data());
    py::dict result;
    result["coef"] = coef;
    result["variance"] = py::array_t<double>(static_cast<py::ssize_t>(K), out.variance.data());
    result["weights"] = py::array_t<double>(static_cast<py::ssize_t>(K), out.weight.data());
    result["responsibilities"] = resp;
    result["loglik_trace"] = py::array_t<double>(static_cast<py::ssize_t>(out.trace.size()), out.trace.data());
    result["converged"] = out.converged;
    return result;
}

py::dict joint_em(const py::object& Y_in, const py::list& designs_in, const py::object& resp0_in,
                  const py::object& max_iter_in, const py::object& tol_in, const py::object& ridge_in,
                  const py::object& min_variance_in, const py::object& tiled_in) {
    const bool tiled = bool_arg(tiled_in, "tiled");
    const DoubleArray Y = real_array_arg(Y_in, "Y");
    const DoubleArray resp0 = real_array_arg(resp0_in, "resp0");
    const DoubleArray floors = real_array_arg(min_variance_in, "min_variance");
    const std::int64_t max_iter = int_arg(max_iter_in, "max_iter", 0, std::numeric_limits<std::int64_t>::max());
    const double tol = real_arg(tol_in, "tol");
    const double ridge = real_arg(ridge_in, "ridge");
    require(Y.ndim() == 2, "Y must be 2-D (n, m), got " + show(Y.ndim()) + " dimensions");
    require(resp0.ndim() == 2, "resp0 must be 2-D (n, K), got " + show(resp0.ndim()) + " dimensions");
    const std::int64_t n = Y.shape(0), m = Y.shape(1), K = resp0.shape(1);
    require(n >= 1 && m >= 1, "Y must not be empty");
    require(static_cast<std::int64_t>(designs_in.size()) == m,
            "designs must hold one design per column of Y (" + show(m) + "), got " + show(designs_in.size()));
    require(resp0.shape(0) == n, "resp0 must have one row per row of Y (n = " + show(n) + "), got " +
                                     show(resp0.shape(0)) + " rows");
    require(K >= 1, "resp0 must have at least one column (one per group)");
    require(floors.ndim() == 1 && floors.shape(0) == m, "min_variance must hold one floor per column of Y");
    require(std::isfinite(tol) && tol >= 0.0, "tol must be finite and >= 0, got " + show(tol));
    require(std::isfinite(ridge) && ridge >= 0.0, "ridge must be finite and >= 0, got " + show(ridge));
    for (std::int64_t j = 0; j < m; ++j) {
        require(std::isfinite(floors.data()[j]) && floors.data()[j] > 0.0, "min_variance must be finite and > 0");
    }
    require(all_bounded(Y), "Y must be finite with magnitudes <= 1e100 (found NaN, inf or a larger value)");
    std::vector<DoubleArray> designs;
    std::vector<const double*> pointers;
    std::vector<std::int64_t> ps;
    for (std::int64_t j = 0; j < m; ++j) {
        designs.push_back(real_array_arg(designs_in[static_cast<std::size_t>(j)], "designs"));
        const DoubleArray& d = designs.back();
        require(d.ndim() == 2 && d.shape(0) == n && d.shape(1) >= 1,
                "designs[" + show(j) + "] must be 2-D with n = " + show(n) + " rows and at least one column");
        require(all_bounded(d), "designs must be finite with magnitudes <= 1e100");
        pointers.push_back(d.data());
        ps.push_back(d.shape(1));
    }
    check_responsibilities(resp0, n, K);

    py::array_t<double> resp({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(K)});
    mixjoint::JointOutput out;
    {
        py::gil_scoped_release release;
        out = tiled ? mixjoint::fit_joint_tiled(Y.data(), pointers, ps, n, K, resp0.data(), resp.mutable_data(),
                                                max_iter, tol, ridge, floors.data())
                    : mixjoint::fit_joint(Y.data(), pointers, ps, n, K, resp0.data(), resp.mutable_data(), max_iter,
                                          tol, ridge, floors.data());
    }
    require(out.ok || !out.singular,
            "a weighted Gram matrix of a group was singular: a design is rank deficient (collinear columns: a "
            "duplicated column, a constant column beside the intercept, a column that is a combination of others) "
            "on the samples of that group; drop or combine the collinear columns of designs, or pass ridge > 0");
    require(out.ok, "every group was retired (fewer than p + 1 effective samples each); use fewer groups or "
                    "more samples");
    py::list coef;
    for (std::int64_t j = 0; j < m; ++j) {
        py::array_t<double> c({static_cast<py::ssize_t>(K), static_cast<py::ssize_t>(ps[static_cast<std::size_t>(j)])});
        std::copy(out.coef[static_cast<std::size_t>(j)].begin(), out.coef[static_cast<std::size_t>(j)].end(),
                  c.mutable_data());
        coef.append(c);
    }
    py::array_t<double> variance({static_cast<py::ssize_t>(m), static_cast<py::ssize_t>(K)});
    std::copy(out.variance.begin(), out.variance.end(), variance.mutable_data());
    py::dict result;
    result["coef"] = coef;
    result["variance"] = variance;
    result["weights"] = py::array_t<double>(static_cast<py::ssize_t>(K), out.weight.data());
    result["responsibilities"] = resp;
    result["loglik_trace"] = py::array_t<double>(static_cast<py::ssize_t>(out.trace.size()), out.trace.data());
    result["converged"] = out.converged;
    return result;
}

py::dict gaussian_mixture(const py::object& X_in, const py::object& centres_in, const py::object& predict_in,
                          const py::object& full_in, const py::object& max_iter_in, const py::object& tol_in,
                          const py::object& reg_covar_in) {
    const bool full = bool_arg(full_in, "full");
    const DoubleArray X = real_array_arg(X_in, "X");
    const auto centres = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(
        integer_array_arg(centres_in, "centres"));
    const DoubleArray predict = real_array_arg(predict_in, "predict");
    const std::int64_t max_iter = int_arg(max_iter_in, "max_iter", 1, std::numeric_limits<std::int64_t>::max());
    const double tol = real_arg(tol_in, "tol");
    const double reg = real_arg(reg_covar_in, "reg_covar");
    require(X.ndim() == 2, "X must be 2-D (n, d), got " + show(X.ndim()) + " dimensions");
    const std::int64_t n = X.shape(0), d = X.shape(1), K = centres.shape(0);
    require(n >= 1 && d >= 1, "X must not be empty");
    require(K >= 1, "centres must hold at least one row index (one per component)");
    for (std::int64_t k = 0; k < K; ++k) {
        const std::int64_t row = centres.data()[k];
        require(row >= 0 && row < n, "centres must hold row indices of X in [0, " + show(n) + "), got " + show(row));
    }
    require(predict.ndim() == 2 && predict.shape(1) == d,
            "predict must be 2-D with the d = " + show(d) + " columns of X");
    require(std::isfinite(tol) && tol >= 0.0, "tol must be finite and >= 0, got " + show(tol));
    require(std::isfinite(reg) && reg >= 0.0, "reg_covar must be finite and >= 0, got " + show(reg));
    require(all_bounded(X), "X must be finite with magnitudes <= 1e100 (found NaN, inf or a larger value)");
    require(all_bounded(predict), "predict must be finite with magnitudes <= 1e100 (found NaN, inf or a larger value)");

    const std::int64_t m = predict.shape(0);
    // the fit's buffers: the rows transposed and centred, responsibilities and log-densities, per row scratch
    const double rows = static_cast<double>(std::max(n, m));
    require_memory(8.0 * rows * (2.0 * static_cast<double>(d) + 2.0 * static_cast<double>(K) + 3.0) +
                       8.0 * static_cast<double>(K) * static_cast<double>(d) * static_cast<double>(d),
                   "X", "the Gaussian mixture's buffers");
    py::array_t<double> resp({static_cast<py::ssize_t>(m), static_cast<py::ssize_t>(K)});
    gmm::GmmOutput out;
    {
        py::gil_scoped_release release;
        out = gmm::fit(X.data(), n, d, centres.data(), K, full, max_iter, tol, reg);
        if (out.ok && !gmm::predict(predict.data(), m, d, K, full, out, resp.mutable_data())) {
            out.ok = false;
            out.underflow = true;
        }
    }
    require(!out.underflow, "a row of X or predict has no finite log-density under any component (its "
                            "squared distance overflows); rescale the data or use a larger reg_covar");
    require(out.ok, "a Gaussian mixture component has an ill-defined covariance (not positive definite: too "
                    "few distinct rows for its components); use fewer components or a larger reg_covar");
    py::array_t<double> means({static_cast<py::ssize_t>(K), static_cast<py::ssize_t>(d)});
    std::copy(out.mean.begin(), out.mean.end(), means.mutable_data());
    py::array_t<double> precisions =
        full ? py::array_t<double>({static_cast<py::ssize_t>(K), static_cast<py::ssize_t>(d), static_cast<py::ssize_t>(d)})
             : py::array_t<double>({static_cast<py::ssize_t>(K), static_cast<py::ssize_t>(d)});
    std::copy(out.precision.begin(), out.precision.end(), precisions.mutable_data());
    py::dict result;
    result["weights"] = py::array_t<double>(static_cast<py::ssize_t>(K), out.weight.data());
    result["means"] = means;
    result["precisions_cholesky"] = precisions;
    result["responsibilities"] = resp;
    result["n_iter"] = out.n_iter;
    result["converged"] = out.converged;
    return result;
}

}  // namespace

void register_mixreg(py::module_& parent) {
    py::module_ m = parent.def_submodule("mixreg", "EM for mixtures of linear regressions (certkit.causal).");
    m.def("em", &em, py::arg("y"), py::arg("design"), py::arg("resp0"), py::kw_only(), py::arg("max_iter"),
          py::arg("tol"), py::arg("ridge"), py::arg("min_variance"),
          "EM for a mixture of K linear regressions started from the responsibilities resp0 (n, K); returns a "
          "dict with coef (K, p), variance (K,), weights (K,), responsibilities (n, K), loglik_trace and "
          "converged.");
    m.def("joint_em", &joint_em, py::arg("Y"), py::arg("designs"), py::arg("resp0"), py::kw_only(),
          py::arg("max_iter"), py::arg("tol"), py::arg("ridge"), py::arg("min_variance"), py::arg("tiled") = py::bool_(false),
          "Joint EM of one latent with K groups over the m columns of Y (n, m), node j regressed on "
          "designs[j] (n, p_j), from responsibilities resp0 (n, K); min_variance (m,) per-node variance "
          "floors; tiled=True accumulates the Gram matrices in register tiles (faster for wide designs, "
          "the same steps up to rounding). Returns a dict with coef (list of (K, p_j)), variance (m, K), weights "
          "(K,) (0 for a retired group), responsibilities (n, K), loglik_trace and converged.");
    m.def("gaussian_mixture", &gaussian_mixture, py::arg("X"), py::arg("centres"), py::arg("predict"), py::kw_only(),
          py::arg("full"), py::arg("max_iter"), py::arg("tol"), py::arg("reg_covar"),
          "EM of a Gaussian mixture (scikit-learn GaussianMixture's steps) on X (n, d) started at the "
          "rows centres (K,) (each component's one row, as after k-means++), full (True) or diagonal covariances; returns a dict with weights "
          "(K,), means (K, d), precisions_cholesky ((K, d, d) upper-triangular factors or (K, d)), the "
          "responsibilities of the rows of predict (m, d), n_iter and converged. Raises ValueError when a "
          "covariance is not positive definite.");
}

}  // namespace certkit
