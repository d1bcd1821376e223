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

inline JointOutput fit_joint(const double* Y, const std::vector<const double*>& designs,
                             const std::vector<std::int64_t>& ps, std::int64_t n, std::int64_t K,
                             const double* resp0, double* resp, std::int64_t max_iter, double tol, double ridge,
                             const double* floors) {
    const auto m = static_cast<std::int64_t>(designs.size());
    const auto nK = static_cast<std::size_t>(n * K);
    JointOutput out;
    out.coef.resize(static_cast<std::size_t>(m));
    for (std::int64_t j = 0; j < m; ++j) {
        out.coef[static_cast<std::size_t>(j)].assign(static_cast<std::size_t>(K * ps[static_cast<std::size_t>(j)]),
                                                     0.0);
    }
    out.variance.assign(static_cast<std::size_t>(m * K), 0.0);
    out.weight.assign(static_cast<std::size_t>(K), 0.0);
    std::int64_t need = 0;
    for (const std::int64_t p : ps) {
        need = std::max(need, p + 1);
    }
    std::copy(resp0, resp0 + nK, resp);
    std::vector<bool> alive(static_cast<std::size_t>(K), true);
    std::vector<double> count(static_cast<std::size_t>(K)), logp(nK), resid(nK), gram, rhs, beta, work;

    for (std::int64_t it = 0; it <= max_iter; ++it) {
        // 1. Retire groups with too few effective samples.
        std::fill(count.begin(), count.end(), 0.0);
        for (std::int64_t i = 0; i < n; ++i) {
            for (std::int64_t k = 0; k < K; ++k) {
                count[static_cast<std::size_t>(k)] += resp[i * K + k];
            }
        }
        bool retired = false;
        std::int64_t live = 0;
        for (std::int64_t k = 0; k < K; ++k) {
            const auto ks = static_cast<std::size_t>(k);
            if (alive[ks] && !(count[ks] >= static_cast<double>(need))) {
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
            std::fill(count.begin(), count.end(), 0.0);
            for (std::int64_t i = 0; i < n; ++i) {
                double total = 0.0;
                for (std::int64_t k = 0; k < K; ++k) {
                    if (!alive[static_cast<std::size_t>(k)]) {
                        resp[i * K + k] = 0.0;
                    }
                    total += resp[i * K + k];
                }
                for (std::int64_t k = 0; k < K; ++k) {
                    if (alive[static_cast<std::size_t>(k)]) {
                        resp[i * K + k] = total > 0.0 ? resp[i * K + k] / total : 1.0 / static_cast<double>(live);
                        count[static_cast<std::size_t>(k)] += resp[i * K + k];
                    }
                }
            }
        }
        // 2. M-step per node; accumulate the log-densities.
        std::fill(logp.begin(), logp.end(), 0.0);
        for (std::int64_t j = 0; j < m; ++j) {
            const auto js = static_cast<std::size_t>(j);
            const std::int64_t p = ps[js];
            const double* phi = designs[js];
            gram.assign(static_cast<std::size_t>(K * p * p), 0.0);
            rhs.assign(static_cast<std::size_t>(K * p), 0.0);
            for (std::int64_t i = 0; i < n; ++i) {
                const double* row = phi + i * p;
                const double y = Y[i * m + j];
                for (std::int64_t k = 0; k < K; ++k) {
                    const double r = resp[i * K + k];
                    if (r == 0.0) {
                        continue;
                    }
                    double* g = gram.data() + k * p * p;
                    double* b = rhs.data() + k * p;
                    for (std::int64_t a = 0; a < p; ++a) {
                        const double ra = r * row[a];
                        b[a] += ra * y;
                        for (std::int64_t c = a; c < p; ++c) {
                            g[a * p + c] += ra * row[c];
                        }
                    }
                }
            }
            double* coef = out.coef[js].data();
            beta.assign(static_cast<std::size_t>(p), 0.0);
            for (std::int64_t k = 0; k < K; ++k) {
                if (!alive[static_cast<std::size_t>(k)]) {
                    continue;
                }
                if (!mixreg::detail::ridge_solve(gram.data() + k * p * p, rhs.data() + k * p, p, ridge, beta.data(),
                                                 work)) {
                    out.ok = false;
                    return out;
                }
                std::copy(beta.begin(), beta.end(), coef + k * p);
            }
            // Residuals, variances, then the log-densities of this node.
            std::vector<double> rss(static_cast<std::size_t>(K), 0.0);
            for (std::int64_t i = 0; i < n; ++i) {
                const double* row = phi + i * p;
                const double y = Y[i * m + j];
                for (std::int64_t k = 0; k < K; ++k) {
                    if (!alive[static_cast<std::size_t>(k)]) {
                        continue;
                    }
                    double fit = 0.0;
                    for (std::int64_t a = 0; a < p; ++a) {
                        fit += row[a] * coef[k * p + a];
                    }
                    const double e = y - fit;
                    resid[i * K + k] = e;
                    rss[static_cast<std::size_t>(k)] += resp[i * K + k] * e * e;
                }
            }
            for (std::int64_t k = 0; k < K; ++k) {
                const auto ks = static_cast<std::size_t>(k);
                if (!alive[ks]) {
                    continue;
                }
                const double var = std::max(rss[ks] / count[ks], floors[j]);
                out.variance[static_cast<std::size_t>(j * K + k)] = var;
                const double norm = std::log(var) + kLog2Pi;
                for (std::int64_t i = 0; i < n; ++i) {
                    const double e = resid[i * K + k];
                    logp[i * K + k] -= 0.5 * (norm + e * e / var);
                }
            }
        }
        // 3. E-step.
        double loglik = 0.0;
        for (std::int64_t k = 0; k < K; ++k) {
            const auto ks = static_cast<std::size_t>(k);
            out.weight[ks] = alive[ks] ? count[ks] / static_cast<double>(n) : 0.0;
        }
        for (std::int64_t i = 0; i < n; ++i) {
            double top = -std::numeric_limits<double>::infinity();
            for (std::int64_t k = 0; k < K; ++k) {
                if (alive[static_cast<std::size_t>(k)]) {
                    logp[i * K + k] += std::log(out.weight[static_cast<std::size_t>(k)]);
                    top = std::max(top, logp[i * K + k]);
                }
            }
            double total = 0.0;
            for (std::int64_t k = 0; k < K; ++k) {
                if (alive[static_cast<std::size_t>(k)]) {
                    const double v = std::exp(logp[i * K + k] - top);
                    resp[i * K + k] = v;
                    total += v;
                } else {
                    resp[i * K + k] = 0.0;
                }
            }
            for (std::int64_t k = 0; k < K; ++k) {
                resp[i * K + k] /= total;
            }
            loglik += top + std::log(total);
        }
        out.trace.push_back(loglik);
        const std::size_t t = out.trace.size();
        if (t > 1 && std::abs(out.trace[t - 1] - out.trace[t - 2]) <= tol * static_cast<double>(n)) {
            out.converged = true;
            break;
        }
    }
    return out;
}

}  // namespace certkit::mixjoint
