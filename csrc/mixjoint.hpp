// Joint EM of one latent with K groups over m nodes (certkit.causal.joint):
//
//   p(x_S | x_pa) = sum_k w_k prod_j N(y_ij; phi_ij' beta_jk, var_jk).
//
// Iteration t (t = 0 .. max_iter), from the responsibilities r of the previous E-step (r = resp0 at
// t = 0):
//   1. groups with N_k = sum_i r_ik below need = max_j p_j + 1 are retired (their responsibility is
//      moved to the live groups in proportion; a sample held only by retired groups becomes uniform
//      over the live ones);
//   2. M-step per node j and live group k: beta_jk = (G + diag(ridge * G_aa))^{-1} b with
//      G = sum_i r_ik phi phi', b = sum_i r_ik y phi (the relative ridge of the single-node kernel),
//      var_jk = max(sum_i r_ik (y - phi' beta_jk)^2 / N_k, floor_j), w_k = N_k / n;
//   3. E-step: log p_ik = log w_k + sum_j log N(y_ij; ., .), logsumexp, new r, log-likelihood L_t;
//   4. stop when t > 0 and |L_t - L_{t-1}| <= tol * n.
// The parameters returned are those of the last M-step, with their own responsibilities and
// log-likelihood.  The NumPy reference (tests/causal/_reference_joint_em.py) takes the same steps.
// Single-threaded and deterministic; the caller releases the GIL.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "mixreg.hpp"

namespace certkit::mixjoint {

struct JointOutput {
    std::vector<std::vector<double>> coef;  // per node, (K, p_j) row-major
    std::vector<double> variance;           // (m, K)
    std::vector<double> weight;             // (K,), 0 for a retired group
    std::vector<double> trace;              // log-likelihood after every iteration
    bool converged = false;
    bool ok = true;  // false if every group was retired
};

constexpr double kLog2Pi = 1.8378770664093454835606594728112;

// Layout: the kernel works on columns (structure of arrays): each node's design is transposed to
// (p, n) once, responsibilities, residuals and log-densities are (K, n), so every loop over samples
// is a contiguous, vectorisable loop (the Gram entries are dot products over samples, exp is
// mixreg's polynomial exp_nonpositive).  Sums are taken in a different order than the NumPy
// reference, so the two agree up to floating-point rounding (the reductions are vectorised with
// OpenMP simd pragmas, compiled with -fopenmp-simd: no OpenMP runtime, a fixed order per build).
inline JointOutput fit_joint(const double* Y, const std::vector<const double*>& designs,
                             const std::vector<std::int64_t>& ps, std::int64_t n, std::int64_t K,
                             const double* resp0, double* resp_out, std::int64_t max_iter, double tol,
                             double ridge, const double* floors) {
    const auto m = static_cast<std::int64_t>(designs.size());
    const auto un = static_cast<std::size_t>(n);
    JointOutput out;
    out.coef.resize(static_cast<std::size_t>(m));
    std::int64_t need = 0;
    // Columns: y_j (n) and the design's columns (p_j, n) for every node.
    std::vector<std::vector<double>> ycol(static_cast<std::size_t>(m)), phicol(static_cast<std::size_t>(m));
    for (std::int64_t j = 0; j < m; ++j) {
        const auto js = static_cast<std::size_t>(j);
        const std::int64_t p = ps[js];
        need = std::max(need, p + 1);
        out.coef[js].assign(static_cast<std::size_t>(K * p), 0.0);
        ycol[js].resize(un);
        phicol[js].resize(static_cast<std::size_t>(p) * un);
        for (std::int64_t i = 0; i < n; ++i) {
            ycol[js][static_cast<std::size_t>(i)] = Y[i * m + j];
            for (std::int64_t a = 0; a < p; ++a) {
                phicol[js][static_cast<std::size_t>(a * n + i)] = designs[js][i * p + a];
            }
        }
    }
    out.variance.assign(static_cast<std::size_t>(m * K), 0.0);
    out.weight.assign(static_cast<std::size_t>(K), 0.0);
    const auto nK = static_cast<std::size_t>(n * K);
    std::vector<double> resp(nK), logp(nK), resid(nK), fit(un), weighted(un), top(un), total(un);
    for (std::int64_t i = 0; i < n; ++i) {
        for (std::int64_t k = 0; k < K; ++k) {
            resp[static_cast<std::size_t>(k * n + i)] = resp0[i * K + k];
        }
    }
    std::vector<bool> alive(static_cast<std::size_t>(K), true);
    std::vector<double> count(static_cast<std::size_t>(K)), gram, rhs, beta, work;

    for (std::int64_t it = 0; it <= max_iter; ++it) {
        // 1. Retire groups with too few effective samples.
        std::int64_t live = 0;
        bool retired = false;
        for (std::int64_t k = 0; k < K; ++k) {
            const auto ks = static_cast<std::size_t>(k);
            const double* r = resp.data() + k * n;
            double c = 0.0;
#pragma omp simd reduction(+ : c)
            for (std::int64_t i = 0; i < n; ++i) {
                c += r[i];
            }
            count[ks] = c;
            if (alive[ks] && !(c >= static_cast<double>(need))) {
                alive[ks] = false;
                retired = true;
            }
            live += alive[ks] ? 1 : 0;
        }
        if (live == 0) {
            out.ok = false;
            return out;
        }
        if (retired) {
            std::fill(total.begin(), total.end(), 0.0);
            for (std::int64_t k = 0; k < K; ++k) {
                double* r = resp.data() + k * n;
                if (!alive[static_cast<std::size_t>(k)]) {
                    std::fill(r, r + n, 0.0);
                    continue;
                }
                for (std::int64_t i = 0; i < n; ++i) {
                    total[static_cast<std::size_t>(i)] += r[i];
                }
            }
            for (std::int64_t k = 0; k < K; ++k) {
                const auto ks = static_cast<std::size_t>(k);
                if (!alive[ks]) {
                    continue;
                }
                double* r = resp.data() + k * n;
                double c = 0.0;
                for (std::int64_t i = 0; i < n; ++i) {
                    const double t = total[static_cast<std::size_t>(i)];
                    r[i] = t > 0.0 ? r[i] / t : 1.0 / static_cast<double>(live);
                    c += r[i];
                }
                count[ks] = c;
            }
        }
        // 2. M-step per node and group; the log-densities accumulate in logp.
        std::fill(logp.begin(), logp.end(), 0.0);
        for (std::int64_t j = 0; j < m; ++j) {
            const auto js = static_cast<std::size_t>(j);
            const std::int64_t p = ps[js];
            const double* y = ycol[js].data();
            const double* phi = phicol[js].data();
            double* coef = out.coef[js].data();
            gram.assign(static_cast<std::size_t>(p * p), 0.0);
            rhs.assign(static_cast<std::size_t>(p), 0.0);
            beta.assign(static_cast<std::size_t>(p), 0.0);
            for (std::int64_t k = 0; k < K; ++k) {
                const auto ks = static_cast<std::size_t>(k);
                if (!alive[ks]) {
                    continue;
                }
                const double* r = resp.data() + k * n;
                for (std::int64_t a = 0; a < p; ++a) {
                    const double* pa = phi + a * n;
                    double rb = 0.0;
#pragma omp simd reduction(+ : rb)
                    for (std::int64_t i = 0; i < n; ++i) {
                        weighted[static_cast<std::size_t>(i)] = r[i] * pa[i];
                        rb += weighted[static_cast<std::size_t>(i)] * y[i];
                    }
                    rhs[static_cast<std::size_t>(a)] = rb;
                    for (std::int64_t c = a; c < p; ++c) {
                        const double* pc = phi + c * n;
                        double g = 0.0;
#pragma omp simd reduction(+ : g)
                        for (std::int64_t i = 0; i < n; ++i) {
                            g += weighted[static_cast<std::size_t>(i)] * pc[i];
                        }
                        gram[static_cast<std::size_t>(a * p + c)] = g;
                    }
                }
                if (!mixreg::detail::ridge_solve(gram.data(), rhs.data(), p, ridge, beta.data(), work)) {
                    out.ok = false;
                    return out;
                }
                std::copy(beta.begin(), beta.end(), coef + k * p);
                // Residuals and the weighted residual sum of squares.
                std::fill(fit.begin(), fit.end(), 0.0);
                for (std::int64_t a = 0; a < p; ++a) {
                    const double* pa = phi + a * n;
                    const double b = beta[static_cast<std::size_t>(a)];
                    for (std::int64_t i = 0; i < n; ++i) {
                        fit[static_cast<std::size_t>(i)] += pa[i] * b;
                    }
                }
                double* e = resid.data() + k * n;
                double rss = 0.0;
#pragma omp simd reduction(+ : rss)
                for (std::int64_t i = 0; i < n; ++i) {
                    e[i] = y[i] - fit[static_cast<std::size_t>(i)];
                    rss += r[i] * e[i] * e[i];
                }
                const double var = std::max(rss / count[ks], floors[j]);
                out.variance[static_cast<std::size_t>(j * K + k)] = var;
                const double norm = std::log(var) + kLog2Pi, inv = 1.0 / var;
                double* lp = logp.data() + k * n;
                for (std::int64_t i = 0; i < n; ++i) {
                    lp[i] -= 0.5 * (norm + e[i] * e[i] * inv);
                }
            }
        }
        // 3. E-step (log space).
        std::fill(top.begin(), top.end(), -std::numeric_limits<double>::infinity());
        for (std::int64_t k = 0; k < K; ++k) {
            const auto ks = static_cast<std::size_t>(k);
            out.weight[ks] = alive[ks] ? count[ks] / static_cast<double>(n) : 0.0;
            if (!alive[ks]) {
                continue;
            }
            const double lw = std::log(out.weight[ks]);
            double* lp = logp.data() + k * n;
            for (std::int64_t i = 0; i < n; ++i) {
                lp[i] += lw;
                top[static_cast<std::size_t>(i)] = std::max(top[static_cast<std::size_t>(i)], lp[i]);
            }
        }
        std::fill(total.begin(), total.end(), 0.0);
        for (std::int64_t k = 0; k < K; ++k) {
            if (!alive[static_cast<std::size_t>(k)]) {
                continue;  // its responsibilities were zeroed when it was retired
            }
            double* r = resp.data() + k * n;
            const double* lp = logp.data() + k * n;
            for (std::int64_t i = 0; i < n; ++i) {
                r[i] = mixreg::detail::exp_nonpositive(lp[i] - top[static_cast<std::size_t>(i)]);
                total[static_cast<std::size_t>(i)] += r[i];
            }
        }
        double loglik = 0.0;
        for (std::int64_t i = 0; i < n; ++i) {
            const auto is = static_cast<std::size_t>(i);
            loglik += top[is] + std::log(total[is]);
            total[is] = 1.0 / total[is];
        }
        for (std::int64_t k = 0; k < K; ++k) {
            double* r = resp.data() + k * n;
            for (std::int64_t i = 0; i < n; ++i) {
                r[i] *= total[static_cast<std::size_t>(i)];
            }
        }
        out.trace.push_back(loglik);
        const std::size_t t = out.trace.size();
        if (t > 1 && std::abs(out.trace[t - 1] - out.trace[t - 2]) <= tol * static_cast<double>(n)) {
            out.converged = true;
            break;
        }
    }
    for (std::int64_t i = 0; i < n; ++i) {
        for (std::int64_t k = 0; k < K; ++k) {
            resp_out[i * K + k] = resp[static_cast<std::size_t>(k * n + i)];
        }
    }
    return out;
}

}  // namespace certkit::mixjoint
