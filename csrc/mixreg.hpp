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
//
// Speed (one thread): the pass runs over blocks of kBlock samples held as
// structure-of-arrays (design columns transposed once per fit), so every loop
// over the samples of a block is a plain vectorisable loop: the log-densities
// of one component, the max over components, exp (a polynomial, see
// exp_nonpositive; std::exp is an opaque libm call the compiler cannot
// vectorise), and the statistics as dot products of each component's
// responsibilities with the block's rows of [phi_a phi_c, y phi_a, y^2, 1].
// The number of columns p is a template parameter for p <= kMaxUnrolledDim so
// the loops over it unroll; larger p takes the generic instantiation.  The
// log-likelihood takes one log per 8 samples (of the product of their
// normalisers).  The results equal a per-sample evaluation up to
// floating-point rounding (sums are taken in a different order) and are
// deterministic; see CERTKIT_MIXREG_CLONES for the AVX2 build of the loop.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace certkit::mixreg {

struct EmOutput {
    std::vector<double> coef;      // (K, p)
    std::vector<double> variance;  // (K,)
    std::vector<double> weight;    // (K,)
    std::vector<double> trace;     // log-likelihood of every evaluated parameter set
    bool converged = false;
    bool ok = true;  // false if every component was retired (cannot happen when n >= K (p + 1))
    bool singular = false;  // a component with enough samples was retired: its Gram matrix was singular
};

namespace detail {

constexpr double kLog2Pi = 1.8378770664093454835606594728112;
constexpr std::int64_t kBlock = 128;         // samples per block of the pass (buffers of a few 10 KiB)
constexpr std::int64_t kMaxUnrolledDim = 8;  // p = 1..8 get their own instantiation

// exp(x) for x <= 0 (x = -inf allowed) in plain arithmetic, so that loops calling it vectorise.
// x = n ln2 + r with n = round(x / ln2) and |r| <= ln2 / 2 (ln2 split in a high part with trailing
// zero bits, so n * kLn2Hi is exact, and a low part); exp(r) by its Taylor polynomial of degree 13
// (truncation error below 1e-17 relative); 2^n is written into the exponent bits.  The result is
// within a few units in the last place of exp(x).  Below -708, where exp(x) < 2^-1021 and the
// scaling would need subnormals, it returns 0 (an absolute error below 3e-308).
inline double exp_nonpositive(double x) {
    constexpr double kLog2e = 1.4426950408889634074;
    constexpr double kLn2Hi = 6.93147180369123816490e-01;
    constexpr double kLn2Lo = 1.90821492927058770002e-10;
    constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
    constexpr double kMin = -708.0;
    const double xc = x > kMin ? x : kMin;
    const double shifted = xc * kLog2e + kRound;  // low mantissa bits hold n (as 2^51 + n)
    const double nd = shifted - kRound;
    const double r = (xc - nd * kLn2Hi) - nd * kLn2Lo;
    double poly = 1.0 / 6227020800.0;  // 1/13!
    poly = poly * r + 1.0 / 479001600.0;
    poly = poly * r + 1.0 / 39916800.0;
    poly = poly * r + 1.0 / 3628800.0;
    poly = poly * r + 1.0 / 362880.0;
    poly = poly * r + 1.0 / 40320.0;
    poly = poly * r + 1.0 / 5040.0;
    poly = poly * r + 1.0 / 720.0;
    poly = poly * r + 1.0 / 120.0;
    poly = poly * r + 1.0 / 24.0;
    poly = poly * r + 1.0 / 6.0;
    poly = poly * r + 0.5;
    poly = poly * r + 1.0;
    poly = poly * r + 1.0;
    std::uint64_t bits;
    std::memcpy(&bits, &shifted, sizeof bits);
    bits = (bits + 1023) << 52;  // biased exponent n + 1023 in [2, 1023]; the rest shifts out
    double scale;
    std::memcpy(&scale, &bits, sizeof scale);
    const double value = poly * scale;
    return x < kMin ? 0.0 : value;
}

// Sufficient statistics of all K components.  Row k of acc holds, in this order, the upper
// triangle of G_k (row by row), b_k, s_k and N_k (length L); a block of samples is expanded into
// the matching rows of `expanded` (L, kBlock): phi_a phi_c, y phi_a, y^2 and 1 for each sample, so
// every entry of acc[k] grows by the dot product of component k's responsibilities with one row.
// unpack() turns acc into G_k (upper triangle), b_k, s_k and N_k for the M-step.
struct Stats {
    std::int64_t K, p, L;
    std::vector<double> acc, expanded;          // (K, L), (L, kBlock)
    std::vector<double> gram, rhs, syy, count;  // (K, p, p) upper triangle used, (K, p), (K,), (K,)

    Stats(std::int64_t k, std::int64_t dim)
        : K(k), p(dim), L(dim * (dim + 1) / 2 + dim + 2), acc(static_cast<std::size_t>(k * L)),
          expanded(static_cast<std::size_t>(L * kBlock)), gram(static_cast<std::size_t>(k * dim * dim)),
          rhs(static_cast<std::size_t>(k * dim)), syy(static_cast<std::size_t>(k)), count(static_cast<std::size_t>(k)) {}

    void clear() { std::fill(acc.begin(), acc.end(), 0.0); }

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

// The block pass for P columns (P = 0: p read at run time).  cols is the design transposed,
// (p, n); all block buffers are (rows, kBlock).
template <int P>
struct BlockPass {
    std::int64_t n, p, K;
    const double* y;
    const double* cols;
    Stats& st;
    std::vector<double> post;  // (K, kBlock): log-densities, then unnormalised posteriors, then responsibilities
    std::vector<double> top, sum, inv_sum;  // (kBlock,) each

    BlockPass(std::int64_t n_, std::int64_t p_, std::int64_t K_, const double* y_, const double* cols_, Stats& st_)
        : n(n_), p(P > 0 ? P : p_), K(K_), y(y_), cols(cols_), st(st_),
          post(static_cast<std::size_t>(K_ * kBlock)), top(kBlock), sum(kBlock), inv_sum(kBlock) {}

    // Rows of st.expanded for the samples [i0, i0 + m).
    void expand(std::int64_t i0, std::int64_t m) {
        double* out = st.expanded.data();
        const double* __restrict yb = y + i0;
        for (std::int64_t a = 0; a < p; ++a) {
            const double* __restrict xa = cols + a * n + i0;
            for (std::int64_t c = a; c < p; ++c, out += kBlock) {
                const double* __restrict xc = cols + c * n + i0;
                for (std::int64_t j = 0; j < m; ++j) {
                    out[j] = xa[j] * xc[j];
                }
            }
        }
        for (std::int64_t a = 0; a < p; ++a, out += kBlock) {
            const double* __restrict xa = cols + a * n + i0;
            for (std::int64_t j = 0; j < m; ++j) {
                out[j] = yb[j] * xa[j];
            }
        }
        for (std::int64_t j = 0; j < m; ++j) {
            out[j] = yb[j] * yb[j];
        }
        out += kBlock;
        std::fill(out, out + m, 1.0);
    }

    // acc[k] += responsibilities of component k (row k of post) times the expanded rows, for the
    // components with live[k].  Four rows at a time, so each responsibility is loaded once per four
    // products (the loop is bound by loads otherwise).
    void accumulate(std::int64_t m, const std::vector<char>& live) {
        const std::int64_t L = st.L;
        for (std::int64_t k = 0; k < K; ++k) {
            if (!live[static_cast<std::size_t>(k)]) {
                continue;
            }
            const double* __restrict r = post.data() + k * kBlock;
            double* __restrict acc = st.acc.data() + k * L;
            std::int64_t l = 0;
            for (; l + 4 <= L; l += 4) {
                const double* __restrict v0 = st.expanded.data() + l * kBlock;
                const double* __restrict v1 = v0 + kBlock;
                const double* __restrict v2 = v1 + kBlock;
                const double* __restrict v3 = v2 + kBlock;
                double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
                for (std::int64_t j = 0; j < m; ++j) {
                    s0 += r[j] * v0[j];
                    s1 += r[j] * v1[j];
                    s2 += r[j] * v2[j];
                    s3 += r[j] * v3[j];
                }
                acc[l] += s0;
                acc[l + 1] += s1;
                acc[l + 2] += s2;
                acc[l + 3] += s3;
            }
            for (; l < L; ++l) {
                const double* __restrict v = st.expanded.data() + l * kBlock;
                double s = 0.0;
#pragma omp simd reduction(+ : s)
                for (std::int64_t j = 0; j < m; ++j) {
                    s += r[j] * v[j];
                }
                acc[l] += s;
            }
        }
    }

    // Statistics of the starting responsibilities resp0 (n, K); entries that are not > 0 count as 0.
    void accumulate_start(const double* resp0) {
        const std::vector<char> all(static_cast<std::size_t>(K), 1);
        st.clear();
        for (std::int64_t i0 = 0; i0 < n; i0 += kBlock) {
            const std::int64_t m = std::min(kBlock, n - i0);
            for (std::int64_t k = 0; k < K; ++k) {
                for (std::int64_t j = 0; j < m; ++j) {
                    const double r = resp0[(i0 + j) * K + k];
                    post[static_cast<std::size_t>(k * kBlock + j)] = r > 0.0 ? r : 0.0;
                }
            }
            expand(i0, m);
            accumulate(m, all);
        }
    }

    // E-step for the parameters in out: writes the responsibilities into resp (n, K), accumulates the
    // statistics of the next M-step and returns the log-likelihood.
    double e_step(const EmOutput& out, double* resp) {
        std::vector<char> live(static_cast<std::size_t>(K));
        std::vector<double> offset(static_cast<std::size_t>(K)), half_prec(static_cast<std::size_t>(K));
        for (std::int64_t k = 0; k < K; ++k) {
            const auto ks = static_cast<std::size_t>(k);
            live[ks] = out.weight[ks] > 0.0;
            if (live[ks]) {  // log w_k + log N(.; ., var_k) = offset_k - half_prec_k e^2
                offset[ks] = std::log(out.weight[ks]) - 0.5 * (kLog2Pi + std::log(out.variance[ks]));
                half_prec[ks] = 0.5 / out.variance[ks];
            }
        }
        st.clear();
        double loglik = 0.0;
        for (std::int64_t i0 = 0; i0 < n; i0 += kBlock) {
            const std::int64_t m = std::min(kBlock, n - i0);
            const double* __restrict yb = y + i0;
            double* __restrict tp = top.data();
            double* __restrict sm = sum.data();
            double* __restrict inv = inv_sum.data();
            std::fill(tp, tp + m, -std::numeric_limits<double>::infinity());
            std::fill(sm, sm + m, 0.0);
            for (std::int64_t k = 0; k < K; ++k) {  // log-densities and their max over live components
                const auto ks = static_cast<std::size_t>(k);
                double* __restrict lp = post.data() + k * kBlock;
                if (!live[ks]) {
                    continue;
                }
                const double* beta = out.coef.data() + k * p;
                const double c0 = offset[ks], h = half_prec[ks];
#pragma omp simd
                for (std::int64_t j = 0; j < m; ++j) {
                    double mu = 0.0;
                    for (std::int64_t a = 0; a < p; ++a) {
                        mu += cols[a * n + i0 + j] * beta[a];
                    }
                    const double e = yb[j] - mu;
                    const double v = c0 - h * e * e, t = tp[j];
                    lp[j] = v;
                    tp[j] = v > t ? v : t;
                }
            }
            for (std::int64_t k = 0; k < K; ++k) {  // unnormalised posteriors and their sums
                double* __restrict q = post.data() + k * kBlock;
                if (!live[static_cast<std::size_t>(k)]) {
                    std::fill(q, q + m, 0.0);
                    continue;
                }
#pragma omp simd
                for (std::int64_t j = 0; j < m; ++j) {
                    q[j] = exp_nonpositive(q[j] - tp[j]);
                    sm[j] += q[j];
                }
            }
#pragma omp simd
            for (std::int64_t j = 0; j < m; ++j) {
                inv[j] = 1.0 / sm[j];
            }
            for (std::int64_t k = 0; k < K; ++k) {  // responsibilities
                double* __restrict q = post.data() + k * kBlock;
#pragma omp simd
                for (std::int64_t j = 0; j < m; ++j) {
                    q[j] *= inv[j];
                }
                for (std::int64_t j = 0; j < m; ++j) {
                    resp[(i0 + j) * K + k] = q[j];
                }
            }
            // log-likelihood: sum of top + log(sum); each sum lies in [1, K], so a product of 8 of
            // them cannot overflow and one log serves 8 samples.
            for (std::int64_t j0 = 0; j0 < m; j0 += 8) {
                const std::int64_t j1 = std::min(j0 + 8, m);
                double prod = 1.0;
                for (std::int64_t j = j0; j < j1; ++j) {
                    loglik += tp[j];
                    prod *= sm[j];
                }
                loglik += std::log(prod);
            }
            expand(i0, m);
            accumulate(m, live);
        }
        return loglik;
    }
};

// Lower Cholesky factor L (row-major, p x p, zero above the diagonal) of the symmetric matrix A whose
// entries entry(a, c) (c <= a) gives: A = L L'.  Returns false if A is not numerically positive definite.
// Shared by the M-steps (ridge_solve) and the Gaussian-mixture starts (csrc/gmm.hpp).
template <class Entry>
inline bool cholesky_lower(Entry entry, std::int64_t p, double* L) {
    std::fill(L, L + p * p, 0.0);
    for (std::int64_t a = 0; a < p; ++a) {
        for (std::int64_t c = 0; c <= a; ++c) {
            double s = entry(a, c);
            for (std::int64_t m = 0; m < c; ++m) {
                s -= L[a * p + m] * L[c * p + m];
            }
            if (a == c) {
                if (!(s > 0.0) || !std::isfinite(s)) {
                    return false;
                }
                L[a * p + a] = std::sqrt(s);
            } else {
                L[a * p + c] = s / L[c * p + c];
            }
        }
    }
    return true;
}

// Solve (G + diag(ridge * G_aa)) beta = b by Cholesky (G given by its upper triangle).
// Returns false if the matrix is not numerically positive definite.
inline bool ridge_solve(const double* g, const double* b, std::int64_t p, double ridge, double* beta,
                        std::vector<double>& work) {
    work.resize(static_cast<std::size_t>(p * p));
    const auto entry = [g, p, ridge](std::int64_t a, std::int64_t c) {
        double s = g[c * p + a];  // A[a][c] = A[c][a] = upper (c, a)
        if (a == c) {
            s += g[a * p + a] > 0.0 ? ridge * g[a * p + a] : ridge;
        }
        return s;
    };
    if (!cholesky_lower(entry, p, work.data())) {
        return false;
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
        if (!(nk >= static_cast<double>(p + 1))) {
            out.weight[ks] = 0.0;
            continue;
        }
        if (!ridge_solve(g, b, p, ridge, beta, work)) {
            out.weight[ks] = 0.0;
            out.singular = true;
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

// On x86-64 Linux with GCC the EM loop is compiled twice, for the baseline x86-64 (SSE2) and for
// x86-64-v3 (AVX2 + FMA: four doubles per instruction), and the loader picks the clone the CPU
// runs (an ifunc); flatten inlines the whole pass into each clone.  The two clones differ only in
// floating-point rounding (vector width of the sums, fused multiply-adds); each is deterministic.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define CERTKIT_MIXREG_CLONES __attribute__((target_clones("arch=x86-64-v3", "default"), flatten))
#else
#define CERTKIT_MIXREG_CLONES
#endif

// The EM loop for P columns (P = 0: any p).
template <int P>
CERTKIT_MIXREG_CLONES EmOutput fit_em_dim(const double* y, const double* phi, std::int64_t n, std::int64_t p, std::int64_t K,
                    const double* resp0, double* resp, std::int64_t max_iter, double tol, double ridge,
                    double min_variance) {
    EmOutput out;
    out.coef.assign(static_cast<std::size_t>(K * p), 0.0);
    out.variance.assign(static_cast<std::size_t>(K), 1.0);
    out.weight.assign(static_cast<std::size_t>(K), 1.0);
    std::vector<double> cols(static_cast<std::size_t>(n * p));  // the design transposed, (p, n)
    for (std::int64_t i = 0; i < n; ++i) {
        for (std::int64_t a = 0; a < p; ++a) {
            cols[static_cast<std::size_t>(a * n + i)] = phi[i * p + a];
        }
    }
    Stats st(K, p);
    BlockPass<P> pass(n, p, K, y, cols.data(), st);
    std::vector<double> work;

    pass.accumulate_start(resp0);
    st.unpack();
    if (m_step(st, ridge, min_variance, out, work) == 0) {
        out.ok = false;
        return out;
    }
    for (std::int64_t it = 0;; ++it) {
        const double loglik = pass.e_step(out, resp);
        const bool converged =
            !out.trace.empty() && std::abs(loglik - out.trace.back()) <= tol * static_cast<double>(n);
        out.trace.push_back(loglik);
        if (converged || it >= max_iter) {
            out.converged = converged;
            return out;
        }
        st.unpack();
        if (m_step(st, ridge, min_variance, out, work) == 0) {
            out.ok = false;
            return out;
        }
    }
}

template <int... Ps>
EmOutput dispatch_dim(std::integer_sequence<int, Ps...>, std::int64_t p, const double* y, const double* phi,
                      std::int64_t n, std::int64_t K, const double* resp0, double* resp, std::int64_t max_iter,
                      double tol, double ridge, double min_variance) {
    using Fit = EmOutput (*)(const double*, const double*, std::int64_t, std::int64_t, std::int64_t, const double*,
                             double*, std::int64_t, double, double, double);
    constexpr Fit table[] = {&fit_em_dim<Ps>...};  // table[P] = fit_em_dim<P>; table[0] is generic
    const Fit fit = p < static_cast<std::int64_t>(sizeof...(Ps)) ? table[p] : table[0];
    return fit(y, phi, n, p, K, resp0, resp, max_iter, tol, ridge, min_variance);
}

}  // namespace detail

// Run EM from the responsibilities resp0 (n, K): the first M-step uses them.
// On return resp (n, K) holds the responsibilities of the returned parameters.
inline EmOutput fit_em(const double* y, const double* phi, std::int64_t n, std::int64_t p, std::int64_t K,
                       const double* resp0, double* resp, std::int64_t max_iter, double tol, double ridge,
                       double min_variance) {
    return detail::dispatch_dim(std::make_integer_sequence<int, detail::kMaxUnrolledDim + 1>{}, p, y, phi, n, K,
                                resp0, resp, max_iter, tol, ridge, min_variance);
}

}  // namespace certkit::mixreg
