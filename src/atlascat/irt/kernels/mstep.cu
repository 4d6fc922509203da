/* The M-step of the binary item models (Rasch to 4PL) as one kernel: one warp per item.
 *
 * Each item's complete-data objective
 *     l_j = sum_q r_jq log P_j(x_q) + (n_jq - r_jq) log Q_j(x_q) + log p(a_j) + log p(c_j) + log p(u_j)
 * is maximized by the batched Newton ascent of atlascat/irt/mstep.py, step for step: exact
 * gradient and Hessian; the Newton step where -H is positive definite (Cholesky, pivot >
 * 1e-8 x the largest diagonal entry), else Fisher scoring with a 1e-8 ridge; steps capped at 2
 * internal units per coordinate and cut at the bounds; backtracking on t = 1, 1/2, ... with
 * Armijo's rule (and u - c >= UC_GAP for the 4PL); an item stops when its predicted gain is at
 * rounding level, its step below step_tol, or its line search fails. The formulas are those of
 * ItemModel.derivative_terms / ItemModel.objective / prior_terms (atlascat/irt/itemmodel.py).
 *
 * The 32 lanes of a warp split the quadrature nodes (lane l takes q = l, l + 32, ...) and add
 * their partial sums by a butterfly (__shfl_xor_sync), which leaves every lane the same total
 * (floating-point addition commutes), so the small Newton algebra runs redundantly and
 * uniformly on all lanes and lane 0 writes the item's parameters.
 *
 * Built by NVRTC on the device (atlascat/irt/fused.py); the same file compiles as plain C on
 * the host (one lane, a loop over items: atlas_mstep_host), which the tests compare with the
 * NumPy M-step.
 *
 * Layout of the configuration arrays (written by atlascat.irt.fused.config):
 *   ic: n_items, Q, dense_n, has_c, has_u, log_slope, k, free[4], max_newton, max_halvings,
 *       prior kind of a, c, u (0 none, 1 normal on the internal value, 2 log-normal on a, 3 beta)
 *   dc: lo[4], hi[4] (per free coordinate), prior parameters of a, c, u (3 each: mu, sigma,
 *       constant; or alpha, beta, ln B(alpha, beta)), step_tol, pred_rel
 */
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ATLAS_DEVICE 1
#define DEV __device__ __forceinline__
#define LANES 32
#else
#include <math.h>
#define DEV static inline
#define LANES 1
#endif

#define UC_GAP 1e-6

typedef struct {
    int n_items, Q, dense, has_c, has_u, log_slope, k, f[4], max_newton, max_halvings;
    int pk[3];
    double lo[4], hi[4], pp[3][3], step_tol, pred_rel;
} Cfg;

DEV double wsum(double v) {
#ifdef ATLAS_DEVICE
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
#endif
    return v;
}

/* NumPy's maximum / minimum: NaN wins */
DEV double nmax(double a, double b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }
DEV double nmin(double a, double b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }
DEV double clipd(double v, double lo, double hi) { return v < lo ? lo : (v > hi ? hi : v); }

DEV double expit(double x) {
    double e = exp(-fabs(x));
    return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

DEV double log_expit(double x) { return (x < 0 ? x : 0.0) - log1p(exp(-fabs(x))); }

DEV void load_cfg(Cfg* c, const int* ic, const double* dc) {
    c->n_items = ic[0]; c->Q = ic[1]; c->dense = ic[2]; c->has_c = ic[3]; c->has_u = ic[4];
    c->log_slope = ic[5]; c->k = ic[6];
    for (int i = 0; i < 4; i++) { c->f[i] = ic[7 + i]; c->lo[i] = dc[i]; c->hi[i] = dc[4 + i]; }
    c->max_newton = ic[11]; c->max_halvings = ic[12];
    for (int i = 0; i < 3; i++) {
        c->pk[i] = ic[13 + i];
        for (int m = 0; m < 3; m++) c->pp[i][m] = dc[8 + 3 * i + m];
    }
    c->step_tol = dc[17]; c->pred_rel = dc[18];
}

/* (log p, d/dt, d2/dt2) of prior i (0: a, 1: c, 2: u) at internal t: prior_terms */
DEV void prior(const Cfg* c, int i, double t, double* lp, double* g, double* h) {
    int kind = c->pk[i];
    const double* p = c->pp[i];
    if (kind == 3) {
        double al = p[0], be = p[1], s = expit(t);
        *lp = (al - 1.0) * log_expit(t) + (be - 1.0) * log_expit(-t) - p[2];
        *g = (al - 1.0) * (1.0 - s) - (be - 1.0) * s;
        *h = -(al + be - 2.0) * s * (1.0 - s);
        return;
    }
    double z = (t - p[0]) / p[1];
    if (kind == 2) { *lp = -t - 0.5 * z * z + p[2]; *g = -1.0 - z / p[1]; }
    else { *lp = -0.5 * z * z + p[2]; *g = -z / p[1]; }
    *h = 0.0 - 1.0 / (p[1] * p[1]);
}

DEV double log_prior(const Cfg* c, const double* t) {
    double out = 0.0, lp, g, h;
    if (c->pk[0]) { prior(c, 0, t[0], &lp, &g, &h); out = out + lp; }
    if (c->pk[1] && c->has_c) { prior(c, 1, t[2], &lp, &g, &h); out = out + lp; }
    if (c->pk[2] && c->has_u) { prior(c, 2, t[3], &lp, &g, &h); out = out + lp; }
    return out;
}

DEV void natural(const Cfg* c, const double* t, double* a, double* cc, double* u) {
    *a = c->log_slope ? exp(t[0]) : t[0];
    *cc = c->has_c ? expit(t[2]) : 0.0;
    *u = c->has_u ? expit(t[3]) : 1.0;
}

DEV double nr_at(const Cfg* c, const double* rj, const double* nrj, int q) {
    return c->dense ? nrj[q] - rj[q] : nrj[q];
}

/* ItemModel.objective of one item: sum_q r log P + (n - r) log Q + log prior */
DEV double objective(const Cfg* c, const double* t, const double* rj, const double* nrj,
                     const double* x, int lane) {
    double a, cc, u, s1 = 0.0, s2 = 0.0;
    natural(c, t, &a, &cc, &u);
    double rng = u - cc, lq_c = c->has_c && !c->has_u ? log_expit(-t[2]) : 0.0;
    for (int q = lane; q < c->Q; q += LANES) {
        double z = a * x[q] + t[1], r = rj[q], nr = nr_at(c, rj, nrj, q), lp, lq;
        if (!(c->has_c || c->has_u)) {
            lp = log_expit(z); lq = log_expit(-z);
        } else if (c->has_u) {
            lp = log(cc + rng * expit(z)); lq = log((1.0 - u) + rng * expit(-z));
        } else {
            lp = log(cc + rng * expit(z)); lq = lq_c + log_expit(-z);
        }
        s1 += r * lp; s2 += nr * lq;
    }
    return wsum(s1) + wsum(s2) + log_prior(c, t);
}

/* ItemModel.derivative_terms of one item: G[4] and H[4][4] (symmetric, every coordinate) of
 * the observed Hessian (fisher = 0) or minus the expected information (fisher = 1), and the
 * objective's value when asked */
DEV void derivs(const Cfg* c, const double* t, const double* rj, const double* nrj,
                const double* x, int lane, int fisher, double* value, double G[4],
                double H[4][4]) {
    double a, cc, u;
    natural(c, t, &a, &cc, &u);
    double d = t[1], rng = u - cc;
    double c12 = 1.0 - 2.0 * cc, u12 = 1.0 - 2.0 * u, ccc = cc * (1.0 - cc), uu = u * (1.0 - u);
    int cu = c->has_c || c->has_u;
    /* partial sums: value (2), gradient (z, z x, c, u), hzz (1, x, x^2), gg, gz (x, 1), vv,
     * vz (x, 1), gv */
    double v1 = 0, v2 = 0, gz0 = 0, gz1 = 0, gc = 0, gu = 0, h0 = 0, h1 = 0, h2 = 0;
    double hgg = 0, hgzx = 0, hgz = 0, hvv = 0, hvzx = 0, hvz = 0, hgv = 0;
    for (int q = lane; q < c->Q; q += LANES) {
        double xq = x[q], z = a * xq + d, r = rj[q], nr = nr_at(c, rj, nrj, q), n = r + nr;
        double e = exp(-fabs(z)), big = 1.0 / (1.0 + e), small = e * big;
        double s = z >= 0 ? big : small, sm = z >= 0 ? small : big;
        double ez, fz, hzz, ip = 0, iq = 0;
        if (!cu) {
            ez = sm; fz = s;
            hzz = -n * s * sm;
            if (value) { v1 += r * log_expit(z); v2 += nr * log_expit(-z); }
        } else {
            double p_ = cc + rng * s, q_ = (1.0 - u) + rng * sm;
            if (value) { v1 += r * log(p_); v2 += nr * log(q_); }
            ip = 1.0 / p_; iq = 1.0 / q_;
            double ssm = rng * s * sm;
            ez = ssm * ip; fz = ssm * iq;
            if (fisher) hzz = -n * ez * fz;
            else { double o = 1.0 - 2.0 * s; hzz = r * ez * (o - ez) - nr * fz * (o + fz); }
        }
        double gz = r * ez - nr * fz;
        gz0 += gz; gz1 += gz * xq;
        h0 += hzz; h1 += hzz * xq; h2 += hzz * (xq * xq);
        double eg = 0, fg = 0;
        if (c->has_c) {
            eg = ccc * sm * ip; fg = ccc * sm * iq;
            gc += r * eg - nr * fg;
            double tgg, tgz;
            if (fisher) { tgg = -n * eg * fg; tgz = -n * eg * fz; }
            else {
                tgg = r * eg * (c12 - eg) - nr * fg * (c12 + fg);
                tgz = -r * eg * (s + ez) + nr * fg * (s - fz);
            }
            hgg += tgg; hgzx += tgz * xq; hgz += tgz;
        }
        if (c->has_u) {
            double ev = uu * s * ip, fv = uu * s * iq, tvv, tvz, tgv;
            gu += r * ev - nr * fv;
            if (fisher) { tvv = -n * ev * fv; tvz = -n * ev * fz; tgv = -n * eg * fv; }
            else {
                tvv = r * ev * (u12 - ev) - nr * fv * (u12 + fv);
                tvz = r * ev * (sm - ez) - nr * fv * (sm + fz);
                tgv = -r * eg * ev - nr * fg * fv;
            }
            hvv += tvv; hvzx += tvz * xq; hvz += tvz; hgv += tgv;
        }
    }
    gz0 = wsum(gz0); gz1 = wsum(gz1); h0 = wsum(h0); h1 = wsum(h1); h2 = wsum(h2);
    if (c->has_c) { gc = wsum(gc); hgg = wsum(hgg); hgzx = wsum(hgzx); hgz = wsum(hgz); }
    if (c->has_u) { gu = wsum(gu); hvv = wsum(hvv); hvzx = wsum(hvzx); hvz = wsum(hvz); hgv = wsum(hgv); }
    for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) H[i][j] = 0.0;
    G[1] = gz0;
    G[0] = c->log_slope ? a * gz1 : gz1;
    G[2] = gc; G[3] = gu;
    double slope_scale = c->log_slope ? a : 1.0;
    if (c->log_slope) {
        H[0][0] = a * a * h2 + (fisher ? 0.0 : a * gz1);
        H[0][1] = a * h1;
    } else {
        H[0][0] = h2; H[0][1] = h1;
    }
    H[1][1] = h0;
    if (c->has_c) { H[2][2] = hgg; H[0][2] = slope_scale * hgzx; H[1][2] = hgz; }
    if (c->has_u) { H[3][3] = hvv; H[0][3] = slope_scale * hvzx; H[1][3] = hvz; H[2][3] = hgv; }
    double lpr = 0.0, lp, g, h;
    if (c->pk[0]) { prior(c, 0, t[0], &lp, &g, &h); lpr = lpr + lp; G[0] = G[0] + g; H[0][0] = H[0][0] + h; }
    if (c->pk[1] && c->has_c) { prior(c, 1, t[2], &lp, &g, &h); lpr = lpr + lp; G[2] = G[2] + g; H[2][2] = H[2][2] + h; }
    if (c->pk[2] && c->has_u) { prior(c, 2, t[3], &lp, &g, &h); lpr = lpr + lp; G[3] = G[3] + g; H[3][3] = H[3][3] + h; }
    for (int i = 0; i < 4; i++) for (int j = 0; j < i; j++) H[i][j] = H[j][i];
    if (value) *value = wsum(v1) + wsum(v2) + lpr;
}

/* pd_solve: A s = g by Cholesky for k <= 4; returns 0 where A is not numerically positive
 * definite (a pivot <= 1e-8 x the largest diagonal entry) */
DEV int pd_solve(int k, double A[4][4], const double* g, double* s) {
    double L[4][4], y[4], big = fabs(A[0][0]);
    for (int i = 1; i < k; i++) big = nmax(big, fabs(A[i][i]));
    double tiny = 1e-8 * big + 1e-300;
    int ok = 1;
    for (int j = 0; j < k; j++) {
        double dj = A[j][j];
        for (int p = 0; p < j; p++) dj = dj - L[j][p] * L[j][p];
        ok = ok && (dj > tiny);
        double ljj = sqrt(nmax(dj, tiny));
        L[j][j] = ljj;
        for (int i = j + 1; i < k; i++) {
            double v = A[i][j];
            for (int p = 0; p < j; p++) v = v - L[i][p] * L[j][p];
            L[i][j] = v / ljj;
        }
    }
    for (int i = 0; i < k; i++) {
        double v = g[i];
        for (int p = 0; p < i; p++) v = v - L[i][p] * y[p];
        y[i] = v / L[i][i];
    }
    for (int i = k - 1; i >= 0; i--) {
        double v = y[i];
        for (int p = i + 1; p < k; p++) v = v - L[p][i] * s[p];
        s[i] = v / L[i][i];
    }
    return ok;
}

DEV int feasible(const Cfg* c, const double* t) {
    return !c->has_u || expit(t[2]) <= expit(t[3]) - UC_GAP;
}

/* mstep() for item j, all lanes of its warp together; lane 0 writes th_out's row */
DEV void mstep_item(const Cfg* c, int j, int lane, const double* th_in, double* th_out,
                    const double* r, const double* nr, const double* x) {
    const double* rj = r + (long long)j * c->Q;
    const double* nrj = c->dense ? nr : nr + (long long)j * c->Q;
    const int k = c->k;
    double t[4], G[4], H[4][4], g[4], A[4][4], step[4], base[4], trial[4], fa = 0.0;
    for (int i = 0; i < 4; i++) t[i] = th_in[4 * j + i];
    for (int it = 0; it < c->max_newton; it++) {
        derivs(c, t, rj, nrj, x, lane, 0, it == 0 ? &fa : (double*)0, G, H);
        for (int i = 0; i < k; i++) {
            g[i] = G[c->f[i]];
            for (int m = 0; m < k; m++) A[i][m] = -H[c->f[i]][c->f[m]];
        }
        if (!pd_solve(k, A, g, step)) {   /* Fisher scoring */
            derivs(c, t, rj, nrj, x, lane, 1, (double*)0, G, H);
            double bigI = fabs(H[c->f[0]][c->f[0]]);
            for (int i = 0; i < k; i++)
                for (int m = 0; m < k; m++) {
                    A[i][m] = -H[c->f[i]][c->f[m]];
                    bigI = nmax(bigI, fabs(A[i][m]));
                }
            double ridge = 1e-8 * bigI + 1e-12;
            for (int i = 0; i < k; i++) A[i][i] = A[i][i] + ridge;
            pd_solve(k, A, g, step);
        }
        double big = fabs(step[0]);
        for (int i = 1; i < k; i++) big = nmax(big, fabs(step[i]));
        double scale = nmin(1.0, 2.0 / nmax(big, 1e-300));
        for (int i = 0; i < k; i++) {
            base[i] = t[c->f[i]];
            step[i] = clipd(base[i] + step[i] * scale, c->lo[i], c->hi[i]) - base[i];
        }
        double pred = step[0] * g[0], smax = fabs(step[0]);
        for (int i = 1; i < k; i++) { pred = pred + step[i] * g[i]; smax = nmax(smax, fabs(step[i])); }
        int go = pred > c->pred_rel * (1.0 + fabs(fa)) && smax > c->step_tol;
        if (!go) break;
        /* backtracking line search (line_search_masked) */
        double tt = 1.0, new_f = fa;
        int moved = 0;
        for (int h = 0; h < c->max_halvings; h++) {
            for (int i = 0; i < 4; i++) trial[i] = t[i];
            for (int i = 0; i < k; i++) trial[c->f[i]] = base[i] + tt * step[i];
            double ft = objective(c, trial, rj, nrj, x, lane);
            int okt = isfinite(ft) && ft >= fa + 1e-4 * tt * pred - 1e-13 * fabs(fa)
                      && feasible(c, trial);
            if (okt) { moved = 1; new_f = ft; break; }
            tt = 0.5 * tt;
        }
        if (moved) for (int i = 0; i < k; i++) t[c->f[i]] = trial[c->f[i]];
        fa = new_f;
        if (!(moved && tt * smax > c->step_tol)) break;
    }
    if (lane == 0) for (int i = 0; i < 4; i++) th_out[4 * j + i] = t[i];
}

#ifdef ATLAS_DEVICE
extern "C" __global__ void atlas_mstep(const double* th_in, double* th_out, const double* r,
                                       const double* nr, const double* x, const int* ic,
                                       const double* dc) {
    Cfg c;
    load_cfg(&c, ic, dc);
    int j = (int)((blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5);
    if (j >= c.n_items) return;   /* a whole warp leaves together */
    mstep_item(&c, j, (int)(threadIdx.x & 31), th_in, th_out, r, nr, x);
}
#else
void atlas_mstep_host(const double* th_in, double* th_out, const double* r, const double* nr,
                      const double* x, const int* ic, const double* dc) {
    Cfg c;
    load_cfg(&c, ic, dc);
    for (int j = 0; j < c.n_items; j++) mstep_item(&c, j, 0, th_in, th_out, r, nr, x);
}
#endif
