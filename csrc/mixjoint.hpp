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
//
// fit_joint_tiled takes the same steps for wide designs (the spline mechanisms of certkit.causal): the
// Gram matrix of [phi, y] of each node and group is accumulated over blocks of kTileBlock samples in
// 2 x 4 tiles of entries (six column loads per eight multiply-adds instead of two per one), and the
// loop is also compiled for AVX2 + FMA (CERTKIT_MIXREG_CLONES).  Its sums run in another order than
// fit_joint's, so the two agree up to floating-point rounding; fit_joint itself is unchanged.
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
    bool ok = true;         // false if every group was retired or a weighted Gram matrix was singular
    bool singular = false;  // ok is false because a weighted Gram matrix was singular
};

constexpr double kLog2Pi = 1.8378770664093454835606594728112;
constexpr std::int64_t kTileBlock = 512;  // samples per block of the tiled Gram accumulation

// The upper triangle of G = sum_i r_i z_i z_i' for the q rows of aug (q, n), z_i its column i, in 2 x 4
// tiles over blocks of kTileBlock samples; g (q, q) row-major, only entries c >= a are written.
inline void tiled_gram(const double* aug, const double* r, std::int64_t n, std::int64_t q, double* g) {
    std::fill(g, g + q * q, 0.0);
    for (std::int64_t s0 = 0; s0 < n; s0 += kTileBlock) {
        const std::int64_t len = std::min(kTileBlock, n - s0);
        const double* rr = r + s0;
        for (std::int64_t a = 0; a < q; a += 2) {
            // Rows past the end repeat the last one; only distinct entries are stored.
            const std::int64_t a1 = std::min(a + 1, q - 1);
            const double* x0 = aug + a * n + s0;
            const double* x1 = aug + a1 * n + s0;
            for (std::int64_t c = a; c < q; c += 4) {
                const std::int64_t c1 = std::min(c + 1, q - 1), c2 = std::min(c + 2, q - 1),
                                   c3 = std::min(c + 3, q - 1);
                const double* z0 = aug + c * n + s0;
                const double* z1 = aug + c1 * n + s0;
                const double* z2 = aug + c2 * n + s0;
                const double* z3 = aug + c3 * n + s0;
                double g00 = 0.0, g01 = 0.0, g02 = 0.0, g03 = 0.0, g10 = 0.0, g11 = 0.0, g12 = 0.0, g13 = 0.0;
#pragma omp simd reduction(+ : g00, g01, g02, g03, g10, g11, g12, g13)
                for (std::int64_t i = 0; i < len; ++i) {
                    const double w0 = rr[i] * x0[i], w1 = rr[i] * x1[i];
                    g00 += w0 * z0[i];
                    g01 += w0 * z1[i];
                    g02 += w0 * z2[i];
                    g03 += w0 * z3[i];
                    g10 += w1 * z0[i];
                    g11 += w1 * z1[i];
                    g12 += w1 * z2[i];
                    g13 += w1 * z3[i];
                }
                const double tile[2][4] = {{g00, g01, g02, g03}, {g10, g11, g12, g13}};
                const std::int64_t rows[2] = {a, a1}, cols[4] = {c, c1, c2, c3};
                for (int u = 0; u < (a1 > a ? 2 : 1); ++u) {
                    for (int v = 0; v < 4; ++v) {
                        if ((v == 0 || cols[v] > cols[v - 1]) && cols[v] >= rows[u]) {
                            g[rows[u] * q + cols[v]] += tile[u][v];
                        }
                    }
                }
            }
        }
    }
}

// Layout: the kernel works on columns (structure of arrays): each node's design is transposed to
// (p, n) once, responsibilities, residuals and log-densities are (K, n), so every loop over samples
// is a contiguous, vectorisable loop (the Gram entries are dot products over samples, exp is
// mixreg's polynomial exp_nonpositive).  Sums are taken in a different order than the NumPy
// reference, so the two agree up to floating-point rounding (the reductions are vectorised with
// OpenMP simd pragmas, compiled with -fopenmp-simd: no OpenMP runtime, a fixed order per build).
template <bool Tiled>
inline JointOutput fit_joint_impl(const double* Y, const std::vector<const double*>& designs,
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
        // Tiled: y is also the row after the design's columns, so one Gram of [phi, y] holds b.
        phicol[js].resize(static_cast<std::size_t>(Tiled ? p + 1 : p) * un);
        for (std::int64_t i = 0; i < n; ++i) {
            ycol[js][static_cast<std::size_t>(i)] = Y[i * m + j];
            for (std::int64_t a = 0; a < p; ++a) {
                phicol[js][static_cast<std::size_t>(a * n + i)] = designs[js][i * p + a];
            }
            if constexpr (Tiled) {
                phicol[js][static_cast<std::size_t>(p * n + i)] = Y[i * m + j];
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
    std::vector<double> count(static_cast<std::size_t>(K)), gram, rhs, beta, work, augmented;

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
                if constexpr (Tiled) {
                    const std::int64_t q = p + 1;
                    augmented.resize(static_cast<std::size_t>(q * q));
                    tiled_gram(phi, r, n, q, augmented.data());
                    for (std::int64_t a = 0; a < p; ++a) {
                        for (std::int64_t c = a; c < p; ++c) {
                            gram[static_cast<std::size_t>(a * p + c)] = augmented[static_cast<std::size_t>(a * q + c)];
                        }
                        rhs[static_cast<std::size_t>(a)] = augmented[static_cast<std::size_t>(a * q + p)];
                    }
                } else {
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
                }
                if (!mixreg::detail::ridge_solve(gram.data(), rhs.data(), p, ridge, beta.data(), work)) {
                    out.ok = false;
                    out.singular = true;
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

// The joint EM (the steps above), summing the Gram matrices sample by sample per entry.
inline JointOutput fit_joint(const double* Y, const std::vector<const double*>& designs,
                             const std::vector<std::int64_t>& ps, std::int64_t n, std::int64_t K,
                             const double* resp0, double* resp_out, std::int64_t max_iter, double tol,
                             double ridge, const double* floors) {
    return fit_joint_impl<false>(Y, designs, ps, n, K, resp0, resp_out, max_iter, tol, ridge, floors);
}

// The same EM with the tiled Gram accumulation, for wide designs (see the top of this file).
CERTKIT_MIXREG_CLONES inline JointOutput fit_joint_tiled(const double* Y, const std::vector<const double*>& designs,
                                                         const std::vector<std::int64_t>& ps, std::int64_t n,
                                                         std::int64_t K, const double* resp0, double* resp_out,
                                                         std::int64_t max_iter, double tol, double ridge,
                                                         const double* floors) {
    return fit_joint_impl<true>(Y, designs, ps, n, K, resp0, resp_out, max_iter, tol, ridge, floors);
}

}  // namespace certkit::mixjoint
