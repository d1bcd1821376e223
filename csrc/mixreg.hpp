// EM for a mixture of K linear regressions with Gaussian noise:
//
//   p(y_i | phi_i) = sum_k w_k N(y_i; phi_i' beta_k, var_k).
//
// One pass over the samples per iteration does two things at once (the fused
// step): the log-space E-step for the current parameters (log-densities,
// logsumexp, responsibilities r_ik, the log-likelihood) and the accumulation
// of the sufficient statistics of the next M-step with those responsibilities:
//
//   G_k = sum_i r_ik phi_i phi_i',  b_k = sum_i r_ik y_i phi_i,
//   s_k = sum_i r_ik y_i^2,          N_k = sum_i r_ik.
//
// M-step: beta_k = (G_k + Lambda_k)^{-1} b_k (Cholesky) with the tiny per-column
// ridge Lambda_k = diag(ridge * G_k[a][a]) (ridge where G_k[a][a] = 0: that
// column is zero on the component, so its coefficient is 0 for any ridge), so
// rescaling a column of phi rescales its coefficient and leaves the fit and
// the log-likelihood unchanged; the residual sum of squares
// from the statistics, RSS_k = s_k - 2 beta_k'b_k + beta_k'G_k beta_k
// (clipped at 0), var_k = max(RSS_k / N_k, min_variance).
// A component with N_k < p + 1 (fewer effective samples than its regression
// has parameters) or a Gram matrix that is not positive definite is retired:
// w_k = 0 and it takes no responsibility from then on.  The live components
// get w_k = N_k / sum_live N_j (= N_k / n when nothing was retired), so the
// weights always sum to 1.
//
// Iteration t evaluates the parameters theta_t (log-likelihood L_t); the loop
// stops after the pass in which |L_t - L_{t-1}| <= tol * n (the mean
// log-likelihood changed by at most tol) or after max_iter M-steps, and
// returns theta_t with its own responsibilities and log-likelihood, so the
// three always belong together.  The NumPy reference in
// tests/causal/_reference_em.py follows the same steps.
#pragma once

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace certkit::mixreg {

struct EmOutput {
    std::vector<double> coef;      // (K, p)
    std::vector<double> variance;  // (K,)
    std::vector<double> weight;    // (K,)
    std::vector<double> trace;     // log-likelihood of every evaluated parameter set
    bool converged = false;
    bool ok = true;  // false if every component was retired (cannot happen when n >= K (p + 1))
};

namespace detail {

constexpr double kLog2Pi = 1.8378770664093454835606594728112;

// Sufficient statistics of all K components, accumulated in one pass.  Each sample is first
// expanded once into the vector v_i = [upper triangle of phi phi', y phi, y^2, 1] (length L); the
// pass then adds r_ik v_i to row k of acc (a contiguous axpy the compiler vectorises), and unpack()
// turns acc back into G_k (upper triangle), b_k, s_k and N_k for the M-step.
struct Stats {
    std::int64_t K, p, L;
    std::vector<double> acc, sample;            // (K, L), (L,)
    std::vector<double> gram, rhs, syy, count;  // (K, p, p) upper triangle used, (K, p), (K,), (K,)

    Stats(std::int64_t k, std::int64_t dim)
        : K(k), p(dim), L(dim * (dim + 1) / 2 + dim + 2), acc(static_cast<std::size_t>(k * L)),
          sample(static_cast<std::size_t>(L)), gram(static_cast<std::size_t>(k * dim * dim)),
          rhs(static_cast<std::size_t>(k * dim)), syy(static_cast<std::size_t>(k)), count(static_cast<std::size_t>(k)) {}

    void clear() { std::fill(acc.begin(), acc.end(), 0.0); }

    inline void load(const double* phi, double y) {
        std::int64_t l = 0;
        for (std::int64_t a = 0; a < p; ++a) {
            for (std::int64_t c = a; c < p; ++c) {
                sample[static_cast<std::size_t>(l++)] = phi[a] * phi[c];
            }
        }
        for (std::int64_t a = 0; a < p; ++a) {
            sample[static_cast<std::size_t>(l++)] = y * phi[a];
        }
        sample[static_cast<std::size_t>(l++)] = y * y;
        sample[static_cast<std::size_t>(l)] = 1.0;
    }

    // Add the loaded sample with weight r to component k.
    inline void add(std::int64_t k, double r) {
        double* __restrict row = acc.data() + k * L;
        const double* __restrict v = sample.data();
        for (std::int64_t l = 0; l < L; ++l) {
            row[l] += r * v[l];
        }
    }

    void unpack() {
        for (std::int64_t k = 0; k < K; ++k) {
            const double* row = acc.data() + k * L;
            double* g = gram.data() + k * p * p;
            std::int64_t l = 0;
            for (std::int64_t a = 0; a < p; ++a) {
                for (std::int64_t c = a; c < p; ++c) {
                    g[a * p + c] = row[l++];
                }
            }
            for (std::int64_t a = 0; a < p; ++a) {
                rhs[static_cast<std::size_t>(k * p + a)] = row[l++];
            }
            syy[static_cast<std::size_t>(k)] = row[l++];
            count[static_cast<std::size_t>(k)] = row[l];
        }
    }
};

// Solve (G + diag(ridge * G_aa)) beta = b by Cholesky (G given by its upper triangle).
// Returns false if the matrix is not numerically positive definite.
inline bool ridge_solve(const double* g, const double* b, std::int64_t p, double ridge, double* beta,
                        std::vector<double>& work) {
    work.assign(static_cast<std::size_t>(p * p), 0.0);
    // Lower Cholesky factor L (row-major), A = L L'.
    for (std::int64_t a = 0; a < p; ++a) {
        for (std::int64_t c = 0; c <= a; ++c) {
            double s = g[c * p + a];  // A[a][c] = A[c][a] = upper (c, a)
            if (a == c) {
                s += g[a * p + a] > 0.0 ? ridge * g[a * p + a] : ridge;
            }
            for (std::int64_t m = 0; m < c; ++m) {
                s -= work[a * p + m] * work[c * p + m];
            }
            if (a == c) {
                if (!(s > 0.0) || !std::isfinite(s)) {
                    return false;
                }
                work[a * p + a] = std::sqrt(s);
            } else {
                work[a * p + c] = s / work[c * p + c];
            }
        }
    }
    for (std::int64_t a = 0; a < p; ++a) {  // forward: L z = b
        double s = b[a];
        for (std::int64_t m = 0; m < a; ++m) {
            s -= work[a * p + m] * beta[m];
        }
        beta[a] = s / work[a * p + a];
    }
    for (std::int64_t a = p - 1; a >= 0; --a) {  // backward: L' beta = z
        double s = beta[a];
        for (std::int64_t m = a + 1; m < p; ++m) {
            s -= work[m * p + a] * beta[m];
        }
        beta[a] = s / work[a * p + a];
    }
    return true;
}

// beta' G beta with G given by its upper triangle.
inline double quad_form(const double* g, const double* beta, std::int64_t p) {
    double q = 0.0;
    for (std::int64_t a = 0; a < p; ++a) {
        q += g[a * p + a] * beta[a] * beta[a];
        for (std::int64_t c = a + 1; c < p; ++c) {
            q += 2.0 * g[a * p + c] * beta[a] * beta[c];
        }
    }
    return q;
}

// M-step; returns the number of live components.
inline std::int64_t m_step(const Stats& st, double ridge, double min_variance, EmOutput& out,
                           std::vector<double>& work) {
    const std::int64_t K = st.K, p = st.p;
    std::int64_t live = 0;
    double total = 0.0;
    for (std::int64_t k = 0; k < K; ++k) {
        const auto ks = static_cast<std::size_t>(k);
        if (out.weight[ks] == 0.0) {
            continue;  // retired components stay retired
        }
        const double nk = st.count[ks];
        const double* g = st.gram.data() + k * p * p;
        const double* b = st.rhs.data() + k * p;
        double* beta = out.coef.data() + k * p;
        if (!(nk >= static_cast<double>(p + 1)) || !ridge_solve(g, b, p, ridge, beta, work)) {
            out.weight[ks] = 0.0;
            continue;
        }
        double bb = 0.0;
        for (std::int64_t a = 0; a < p; ++a) {
            bb += beta[a] * b[a];
        }
        const double rss = std::max(st.syy[ks] - 2.0 * bb + quad_form(g, beta, p), 0.0);
        out.variance[ks] = std::max(rss / nk, min_variance);
        out.weight[ks] = nk;
        total += nk;
        ++live;
    }
    for (std::int64_t k = 0; k < K; ++k) {  // live weights N_k / sum of the live N_k (sum to 1)
        out.weight[static_cast<std::size_t>(k)] /= live > 0 ? total : 1.0;
    }
    return live;
}

}  // namespace detail

// Run EM from the responsibilities resp0 (n, K): the first M-step uses them.
// On return resp (n, K) holds the responsibilities of the returned parameters.
inline EmOutput fit_em(const double* y, const double* phi, std::int64_t n, std::int64_t p, std::int64_t K,
                       const double* resp0, double* resp, std::int64_t max_iter, double tol, double ridge,
                       double min_variance) {
    EmOutput out;
    out.coef.assign(static_cast<std::size_t>(K * p), 0.0);
    out.variance.assign(static_cast<std::size_t>(K), 1.0);
    out.weight.assign(static_cast<std::size_t>(K), 1.0);
    detail::Stats st(K, p);
    std::vector<double> work;
    std::vector<double> logp(static_cast<std::size_t>(K));
    std::vector<double> log_w(static_cast<std::size_t>(K)), log_norm(static_cast<std::size_t>(K)),
        inv_var(static_cast<std::size_t>(K));
    const double neg_inf = -std::numeric_limits<double>::infinity();

    st.clear();
    for (std::int64_t i = 0; i < n; ++i) {
        st.load(phi + i * p, y[i]);
        for (std::int64_t k = 0; k < K; ++k) {
            const double r = resp0[i * K + k];
            if (r > 0.0) {
                st.add(k, r);
            }
        }
    }
    st.unpack();
    if (detail::m_step(st, ridge, min_variance, out, work) == 0) {
        out.ok = false;
        return out;
    }
    for (std::int64_t it = 0;; ++it) {
        for (std::int64_t k = 0; k < K; ++k) {
            const auto ks = static_cast<std::size_t>(k);
            log_w[ks] = out.weight[ks] > 0.0 ? std::log(out.weight[ks]) : neg_inf;
            log_norm[ks] = -0.5 * (detail::kLog2Pi + std::log(out.variance[ks]));
            inv_var[ks] = 1.0 / out.variance[ks];
        }
        st.clear();
        double loglik = 0.0;
        for (std::int64_t i = 0; i < n; ++i) {
            const double* row = phi + i * p;
            double top = neg_inf;
            for (std::int64_t k = 0; k < K; ++k) {
                const auto ks = static_cast<std::size_t>(k);
                if (log_w[ks] == neg_inf) {
                    logp[ks] = neg_inf;
                    continue;
                }
                const double* beta = out.coef.data() + k * p;
                double mu = 0.0;
                for (std::int64_t a = 0; a < p; ++a) {
                    mu += row[a] * beta[a];
                }
                const double e = y[i] - mu;
                logp[ks] = log_w[ks] + log_norm[ks] - 0.5 * e * e * inv_var[ks];
                top = std::max(top, logp[ks]);
            }
            double sum = 0.0;
            for (std::int64_t k = 0; k < K; ++k) {
                const auto ks = static_cast<std::size_t>(k);
                logp[ks] = std::exp(logp[ks] - top);  // now the unnormalised posterior; exp(-inf) = 0
                sum += logp[ks];
            }
            loglik += top + std::log(sum);
            const double inv_sum = 1.0 / sum;
            st.load(row, y[i]);
            for (std::int64_t k = 0; k < K; ++k) {
                const double r = logp[static_cast<std::size_t>(k)] * inv_sum;
                resp[i * K + k] = r;
                if (r > 0.0) {
                    st.add(k, r);
                }
            }
        }
        const bool converged =
            !out.trace.empty() && std::abs(loglik - out.trace.back()) <= tol * static_cast<double>(n);
        out.trace.push_back(loglik);
        if (converged || it >= max_iter) {
            out.converged = converged;
            return out;
        }
        st.unpack();
        if (detail::m_step(st, ridge, min_variance, out, work) == 0) {
            out.ok = false;
            return out;
        }
    }
}

}  // namespace certkit::mixreg
