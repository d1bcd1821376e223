// EM for a Gaussian mixture with diagonal or full covariances: the starts of the joint EM of
// certkit.causal (certkit/causal/starts.py), which fits thousands of small mixtures (n <= 2000 rows of a
// few columns), where a library's per-call overhead costs more than the arithmetic.
//
// The steps are scikit-learn's GaussianMixture's (EM, no variational terms):
//   M-step from responsibilities r (n, K): N_k = sum_i r_ik + 10 eps, mu_k = sum_i r_ik x_i / N_k,
//     full: S_k = sum_i r_ik (x_i - mu_k)(x_i - mu_k)' / N_k + reg I (around the means, as written),
//     diag: s_ka = sum_i r_ik x_ia^2 / N_k - mu_ka^2 + reg;
//     the precision factor P_k = (L_k^{-1})' with S_k = L_k L_k' (upper-triangular; diag: 1 / sqrt(s_k));
//     weights w_k = N_k / n after the start's M-step (the one-hot responsibilities of the k-means++
//     centres), N_k / sum_j N_j after every other.
//   E-step: log p_ik = log w_k - (d log 2 pi + |(x_i - mu_k)' P_k|^2) / 2 + sum_a log P_k[a][a],
//     L = mean_i logsumexp_k log p_ik, r_ik = exp(log p_ik - logsumexp).
//   Iteration t: E-step (bound L_t), M-step; stop when |L_t - L_{t-1}| < tol or after max_iter.
// A covariance that is not positive definite (full) or a variance <= 0 (diag) stops the fit (ok = false),
// and so does a row whose log-densities are all -inf or NaN (its squared distances overflow; underflow).
// The NumPy reference is tests/causal/_reference_gmm.py; results agree up to rounding.
//
// Speed: the rows are held transposed (one array of n values per column, and per component one array of
// n responsibilities), so every loop over the rows is a plain vectorisable loop (sums as OpenMP simd
// reductions, exp by mixreg's exp_nonpositive); compiled for x86-64 and x86-64-v3 like mixreg's EM
// (CERTKIT_MIXREG_CLONES).  Single-threaded and deterministic; the caller releases the GIL.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "mixreg.hpp"

namespace certkit::gmm {

struct GmmOutput {
    std::vector<double> weight;     // (K,)
    std::vector<double> mean;       // (K, d)
    std::vector<double> precision;  // full: (K, d, d) upper-triangular factors; diag: (K, d)
    std::int64_t n_iter = 0;
    bool converged = false;
    bool ok = true;
    bool underflow = false;  // a row with no finite log-density (ok is false too)
};

namespace detail {

constexpr double kLog2Pi = 1.8378770664093454835606594728112;

inline double dot(const double* a, const double* b, std::int64_t n) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (std::int64_t i = 0; i < n; ++i) {
        s += a[i] * b[i];
    }
    return s;
}

// Buffers of one fit: the rows transposed (d, n), the centred columns of one component (d, n), a
// weighted column (n), the responsibilities (K, n) and the log-densities (K, n), per-row scratch (n).
struct Work {
    std::int64_t n, d, K;
    std::vector<double> cols, centred, weighted, resp, logp, top, norm;
    Work(const double* X, std::int64_t n_, std::int64_t d_, std::int64_t K_)
        : n(n_), d(d_), K(K_), cols(static_cast<std::size_t>(n_ * d_)), centred(static_cast<std::size_t>(n_ * d_)),
          weighted(static_cast<std::size_t>(n_)), resp(static_cast<std::size_t>(n_ * K_)),
          logp(static_cast<std::size_t>(n_ * K_)), top(static_cast<std::size_t>(n_)),
          norm(static_cast<std::size_t>(n_)) {
        for (std::int64_t i = 0; i < n; ++i) {
            for (std::int64_t a = 0; a < d; ++a) {
                cols[static_cast<std::size_t>(a * n + i)] = X[i * d + a];
            }
        }
    }
    double* col(std::int64_t a) { return cols.data() + a * n; }
    double* cen(std::int64_t a) { return centred.data() + a * n; }
    // centred <- the columns minus mu (d,)
    void centre(const double* mu) {
        for (std::int64_t a = 0; a < d; ++a) {
            const double* x = col(a);
            double* c = cen(a);
            const double m = mu[a];
#pragma omp simd
            for (std::int64_t i = 0; i < n; ++i) {
                c[i] = x[i] - m;
            }
        }
    }
    double* r(std::int64_t k) { return resp.data() + k * n; }
    double* lp(std::int64_t k) { return logp.data() + k * n; }
};

// Lower Cholesky factor of S (d, d; lower triangle read) and P = (L^{-1})' into P (upper-triangular).
inline bool precision_factor(const double* S, std::int64_t d, std::vector<double>& L, double* P) {
    if (!mixreg::detail::cholesky_lower([S, d](std::int64_t a, std::int64_t c) { return S[a * d + c]; }, d,
                                        L.data())) {
        return false;
    }
    // Column c of L^{-1} by forward substitution, stored as row c of P.
    std::fill(P, P + d * d, 0.0);
    for (std::int64_t c = 0; c < d; ++c) {
        for (std::int64_t a = c; a < d; ++a) {
            double s = a == c ? 1.0 : 0.0;
            for (std::int64_t e = c; e < a; ++e) {
                s -= L[static_cast<std::size_t>(a * d + e)] * P[c * d + e];
            }
            P[c * d + a] = s / L[static_cast<std::size_t>(a * d + a)];
        }
    }
    return true;
}

// M-step from w.resp: out.weight (unnormalised N_k), out.mean, out.precision.  False when a covariance
// is not positive definite.
CERTKIT_MIXREG_CLONES inline bool m_step(Work& w, bool full, double reg, GmmOutput& out) {
    const std::int64_t n = w.n, d = w.d;
    const double tiny = 10.0 * std::numeric_limits<double>::epsilon();
    std::vector<double> S(static_cast<std::size_t>(d * d)), L(static_cast<std::size_t>(d * d));
    for (std::int64_t k = 0; k < w.K; ++k) {
        const double* r = w.r(k);
        double nk = 0.0;
#pragma omp simd reduction(+ : nk)
        for (std::int64_t i = 0; i < n; ++i) {
            nk += r[i];
        }
        nk += tiny;
        out.weight[static_cast<std::size_t>(k)] = nk;
        double* mu = out.mean.data() + k * d;
        for (std::int64_t a = 0; a < d; ++a) {
            mu[a] = dot(r, w.col(a), n) / nk;
        }
        if (!full) {
            double* p = out.precision.data() + k * d;
            for (std::int64_t a = 0; a < d; ++a) {
                const double* x = w.col(a);
                double s = 0.0;
#pragma omp simd reduction(+ : s)
                for (std::int64_t i = 0; i < n; ++i) {
                    s += r[i] * (x[i] * x[i]);
                }
                const double var = s / nk - mu[a] * mu[a] + reg;
                if (!(var > 0.0)) {
                    return false;
                }
                p[a] = 1.0 / std::sqrt(var);
            }
            continue;
        }
        w.centre(mu);
        double* wa = w.weighted.data();
        for (std::int64_t a = 0; a < d; ++a) {
            const double* ca = w.cen(a);
#pragma omp simd
            for (std::int64_t i = 0; i < n; ++i) {
                wa[i] = r[i] * ca[i];
            }
            for (std::int64_t c = 0; c <= a; ++c) {
                S[static_cast<std::size_t>(a * d + c)] = dot(wa, w.cen(c), n) / nk;
            }
            S[static_cast<std::size_t>(a * d + a)] += reg;
        }
        if (!precision_factor(S.data(), d, L, out.precision.data() + k * d * d)) {
            return false;
        }
    }
    return true;
}

// E-step on w.cols under `model`: w.resp receives the responsibilities; returns the mean
// log-likelihood per row, NaN when a row has no finite log-density.
CERTKIT_MIXREG_CLONES inline double e_step(Work& w, bool full, const GmmOutput& model) {
    const std::int64_t n = w.n, d = w.d, K = w.K;
    double* sq = w.weighted.data();
    for (std::int64_t k = 0; k < K; ++k) {
        const double* mu = model.mean.data() + k * d;
        double log_det = 0.0;
        std::fill(sq, sq + n, 0.0);
        if (full) {
            const double* P = model.precision.data() + k * d * d;
            for (std::int64_t a = 0; a < d; ++a) {
                log_det += std::log(P[a * d + a]);
            }
            w.centre(mu);
            // y_c = sum_{a <= c} (x_a - mu_a) P[a][c] (P upper-triangular), sq = sum_c y_c^2
            double* y = w.top.data();
            for (std::int64_t c = 0; c < d; ++c) {
                std::fill(y, y + n, 0.0);
                for (std::int64_t a = 0; a <= c; ++a) {
                    const double* ca = w.cen(a);
                    const double f = P[a * d + c];
#pragma omp simd
                    for (std::int64_t i = 0; i < n; ++i) {
                        y[i] += ca[i] * f;
                    }
                }
#pragma omp simd
                for (std::int64_t i = 0; i < n; ++i) {
                    sq[i] += y[i] * y[i];
                }
            }
        } else {
            const double* p = model.precision.data() + k * d;
            for (std::int64_t a = 0; a < d; ++a) {
                log_det += std::log(p[a]);
                const double* x = w.col(a);
                const double m = mu[a], f = p[a];
#pragma omp simd
                for (std::int64_t i = 0; i < n; ++i) {
                    const double y = (x[i] - m) * f;
                    sq[i] += y * y;
                }
            }
        }
        const double constant =
            std::log(model.weight[static_cast<std::size_t>(k)]) - 0.5 * static_cast<double>(d) * kLog2Pi + log_det;
        double* lp = w.lp(k);
#pragma omp simd
        for (std::int64_t i = 0; i < n; ++i) {
            lp[i] = constant - 0.5 * sq[i];
        }
    }
    double* top = w.top.data();
    double* norm = w.norm.data();
    std::copy(w.lp(0), w.lp(0) + n, top);
    for (std::int64_t k = 1; k < K; ++k) {
        const double* lp = w.lp(k);
#pragma omp simd
        for (std::int64_t i = 0; i < n; ++i) {
            top[i] = std::max(top[i], lp[i]);
        }
    }
    std::fill(norm, norm + n, 0.0);
    for (std::int64_t k = 0; k < K; ++k) {
        const double* lp = w.lp(k);
#pragma omp simd
        for (std::int64_t i = 0; i < n; ++i) {
            norm[i] += mixreg::detail::exp_nonpositive(lp[i] - top[i]);
        }
    }
    double total = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
        if (!std::isfinite(top[i])) {
            return std::numeric_limits<double>::quiet_NaN();
        }
        norm[i] = top[i] + std::log(norm[i]);
        total += norm[i];
    }
    for (std::int64_t k = 0; k < K; ++k) {
        const double* lp = w.lp(k);
        double* r = w.r(k);
#pragma omp simd
        for (std::int64_t i = 0; i < n; ++i) {
            r[i] = mixreg::detail::exp_nonpositive(lp[i] - norm[i]);
        }
    }
    return total / static_cast<double>(n);
}

}  // namespace detail

// The EM of the header comment on X (n, d) started at the rows `centres` (K,) (the start's M-step first).
inline GmmOutput fit(const double* X, std::int64_t n, std::int64_t d, const std::int64_t* centres, std::int64_t K,
                     bool full, std::int64_t max_iter, double tol, double reg) {
    GmmOutput out;
    out.weight.assign(static_cast<std::size_t>(K), 0.0);
    out.mean.assign(static_cast<std::size_t>(K * d), 0.0);
    out.precision.assign(static_cast<std::size_t>(full ? K * d * d : K * d), 0.0);
    detail::Work w(X, n, d, K);
    for (std::int64_t k = 0; k < K; ++k) {
        w.r(k)[centres[k]] = 1.0;
    }
    if (!detail::m_step(w, full, reg, out)) {
        out.ok = false;
        return out;
    }
    for (double& weight : out.weight) {
        weight /= static_cast<double>(n);
    }
    double bound = -std::numeric_limits<double>::infinity();
    for (std::int64_t t = 1; t <= max_iter; ++t) {
        const double previous = bound;
        bound = detail::e_step(w, full, out);
        if (std::isnan(bound)) {
            out.ok = false;
            out.underflow = true;
            return out;
        }
        if (!detail::m_step(w, full, reg, out)) {
            out.ok = false;
            return out;
        }
        double total = 0.0;
        for (const double weight : out.weight) {
            total += weight;
        }
        for (double& weight : out.weight) {
            weight /= total;
        }
        out.n_iter = t;
        if (std::abs(bound - previous) < tol) {
            out.converged = true;
            break;
        }
    }
    return out;
}

// Responsibilities (m, K), row-major, of the rows of `rows` (m, d) under `model`; false when a row has
// no finite log-density.
inline bool predict(const double* rows, std::int64_t m, std::int64_t d, std::int64_t K, bool full,
                    const GmmOutput& model, double* resp) {
    if (m == 0) {
        return true;
    }
    detail::Work w(rows, m, d, K);
    if (std::isnan(detail::e_step(w, full, model))) {
        return false;
    }
    for (std::int64_t k = 0; k < K; ++k) {
        const double* r = w.r(k);
        for (std::int64_t i = 0; i < m; ++i) {
            resp[i * K + k] = r[i];
        }
    }
    return true;
}

}  // namespace certkit::gmm
