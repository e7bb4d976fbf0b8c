// Gauss-Jordan kernel: the Vitis HLS top function and, unchanged, the host C model (see gauss_jordan.h).
// Synthesizable subset only: fixed-size static arrays, no dynamic memory, no recursion, loops with
// bounded trip counts.  Three phases, as HLS wants them: read A (and b, piv) from DDR into on-chip
// arrays, eliminate on chip, write the factors and x back.
//
// Elimination (partial pivoting, column k = 0 .. n-1): pick the largest |W[i][k]|, i >= k; exchange rows
// k and p in the columns not yet eliminated (k .. n-1: the columns before k hold earlier multipliers,
// which later exchanges must not permute); scale row k by 1/pivot; subtract f_i times row k from every
// other row i; keep eta_i = -f_i / pivot in W[i][k] and 1/pivot in W[k][k].  A right-hand side is then
// transformed column by column: swap x[k], x[p]; t = x[k]; x[k] = t eta_k; x[i] += eta_i t.
// Costs n^3 multiply-adds to factor (LU: 2/3 n^3) and n^2 per right-hand side.
#include "gauss_jordan.h"

#if GJ_PRECISION == GJ_DOUBLE
#define GJ_EPS 2.220446049250313e-16  // machine epsilon of the type: pivots below n eps max|A| are noise
#define GJ_MIN_PIVOT 0.0
#define GJ_BIG 1.7976931348623157e308  // |x| above this (or NaN) is reported as GJ_RANGE
#elif GJ_PRECISION == GJ_FLOAT
#define GJ_EPS 1.1920928955078125e-07
#define GJ_MIN_PIVOT 0.0
#define GJ_BIG 3.4028234663852886e+38
#else
#define GJ_EPS (1.0 / (double)(1ULL << (GJ_FIXED_W - GJ_FIXED_I)))
#define GJ_MIN_PIVOT (4.0 / (double)(1ULL << GJ_FIXED_I))             // keeps 1/pivot inside the range
#define GJ_BIG ((double)(1ULL << (GJ_FIXED_I - 1)) * (1.0 - 1.0 / 1048576.0))  // saturated
#endif

static gj_t gj_abs(gj_t a)
{
#pragma HLS INLINE
    return a < gj_t(0) ? gj_t(-a) : a;
}

int gauss_jordan(gj_t A[GJ_NMAX * GJ_NMAX], gj_t b[GJ_NMAX], int piv[GJ_NMAX], int n, int mode)
{
#pragma HLS INTERFACE m_axi port=A offset=slave bundle=gmem depth=GJ_DEPTH_A max_read_burst_length=256 max_write_burst_length=256
#pragma HLS INTERFACE m_axi port=b offset=slave bundle=gmem depth=GJ_NMAX
#pragma HLS INTERFACE m_axi port=piv offset=slave bundle=gmem depth=GJ_NMAX
#pragma HLS INTERFACE s_axilite port=A bundle=control
#pragma HLS INTERFACE s_axilite port=b bundle=control
#pragma HLS INTERFACE s_axilite port=piv bundle=control
#pragma HLS INTERFACE s_axilite port=n bundle=control
#pragma HLS INTERFACE s_axilite port=mode bundle=control
#pragma HLS INTERFACE s_axilite port=return bundle=control
    // (depth: the buffer sizes C/RTL co-simulation uses; HLS pragmas take #define values, UG1399)
    if (mode == GJ_MODE_INFO) return GJ_INFO_WORD;
    if (mode != GJ_MODE_FACTOR && mode != GJ_MODE_SOLVE) return GJ_BAD_MODE;
    if (n < 1 || n > GJ_NMAX) return GJ_BAD_SIZE;

    gj_t W[GJ_NMAX][GJ_NMAX];  // the matrix on chip (BRAM), columns spread over GJ_UNROLL banks
#pragma HLS ARRAY_PARTITION variable=W cyclic factor=GJ_UNROLL dim=2
    gj_t prow[GJ_NMAX];        // pivot row, own banks: one read per bank and clock in the update
#pragma HLS ARRAY_PARTITION variable=prow cyclic factor=GJ_UNROLL dim=1
    gj_t fcol[GJ_NMAX];        // pivot column (the multipliers f_i) before it is overwritten
    gj_t x[GJ_NMAX];
    int p[GJ_NMAX];

    // ---- read phase: one burst for A (row by row), then b and the pivots
    gj_t amax = gj_t(0);
    int r = 0, c = 0;
read_a:
    for (int idx = 0; idx < n * n; idx++) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=GJ_DEPTH_A
#pragma HLS PIPELINE II=1
        gj_t a = A[idx];
        W[r][c] = a;
        gj_t m = gj_abs(a);
        if (m > amax) amax = m;
        if (++c == n) {
            c = 0;
            r++;
        }
    }
read_b:
    for (int i = 0; i < n; i++) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=GJ_NMAX
#pragma HLS PIPELINE II=1
        x[i] = b[i];
    }

    int status = GJ_OK;
    if (mode == GJ_MODE_SOLVE) {
    read_piv:
        for (int i = 0; i < n; i++) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=GJ_NMAX
#pragma HLS PIPELINE II=1
            int q = piv[i];
            p[i] = q;
            if (q < i || q >= n) status = GJ_BAD_PIVOTS;
        }
        if (status != GJ_OK) return status;
    } else {
        // ---- elimination on chip
#ifdef GJ_PIVOT_TOL
        const gj_t tiny = amax * gj_t(GJ_EPS) * gj_t(GJ_PIVOT_TOL);
#elif GJ_PRECISION == GJ_FLOAT
        const gj_t tiny = amax * gj_t(GJ_EPS);  // see GJ_SINGULAR in gauss_jordan.h
#else
        const gj_t tiny = amax * gj_t(GJ_EPS) * gj_t(n);  // rounding noise in a singular matrix's pivot grows ~ n eps
#endif
        const gj_t min_pivot = gj_t(GJ_MIN_PIVOT);
    columns:
        for (int k = 0; k < n; k++) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=GJ_NMAX
            int pr = k;
            gj_t best = gj_abs(W[k][k]);
        search:
            for (int i = k + 1; i < n; i++) {
#pragma HLS LOOP_TRIPCOUNT min=0 max=GJ_NMAX
#pragma HLS PIPELINE II=1
                gj_t m = gj_abs(W[i][k]);
                if (m > best) {
                    best = m;
                    pr = i;
                }
            }
            if (!(best > tiny) || !(best > min_pivot)) {  // also catches NaN pivots
                status = GJ_SINGULAR;
                break;
            }
            p[k] = pr;
            if (pr != k) {
            exchange:
                for (int j = k; j < n; j++) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=GJ_NMAX
#pragma HLS PIPELINE II=1
                    gj_t t = W[k][j];
                    W[k][j] = W[pr][j];
                    W[pr][j] = t;
                }
            }
            const gj_t inv = gj_t(1) / W[k][k];
        scale:
            for (int j = k + 1; j < n; j++) {
#pragma HLS LOOP_TRIPCOUNT min=0 max=GJ_NMAX
#pragma HLS PIPELINE II=1
                gj_t v = W[k][j] * inv;
                W[k][j] = v;
                prow[j] = v;
            }
        copy_column:
            for (int i = 0; i < n; i++) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=GJ_NMAX
#pragma HLS PIPELINE II=1
                fcol[i] = W[i][k];
            }
        rows:
            for (int i = 0; i < n; i++) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=GJ_NMAX
                if (i == k) continue;
                const gj_t f = fcol[i];
            update:
                for (int j = k + 1; j < n; j++) {
#pragma HLS LOOP_TRIPCOUNT min=0 max=GJ_NMAX
#pragma HLS PIPELINE II=1
#pragma HLS UNROLL factor=GJ_UNROLL
#pragma HLS DEPENDENCE variable=W inter false
                    W[i][j] = W[i][j] - f * prow[j];
                }
                W[i][k] = -(f * inv);
            }
            W[k][k] = inv;
        }
        if (status != GJ_OK) return status;
        // ---- write the factors back (SOLVE calls read them again)
        r = 0;
        c = 0;
    write_a:
        for (int idx = 0; idx < n * n; idx++) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=GJ_DEPTH_A
#pragma HLS PIPELINE II=1
            A[idx] = W[r][c];
            if (++c == n) {
                c = 0;
                r++;
            }
        }
    write_piv:
        for (int i = 0; i < n; i++) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=GJ_NMAX
#pragma HLS PIPELINE II=1
            piv[i] = p[i];
        }
    }

    // ---- apply the factors to the right-hand side
apply:
    for (int k = 0; k < n; k++) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=GJ_NMAX
        const int q = p[k];
        if (q != k) {
            gj_t t = x[k];
            x[k] = x[q];
            x[q] = t;
        }
        const gj_t t = x[k];
    apply_rows:
        for (int i = 0; i < n; i++) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=GJ_NMAX
#pragma HLS PIPELINE II=1
            x[i] = (i == k) ? gj_t(W[k][k] * t) : gj_t(x[i] + W[i][k] * t);
        }
    }

    // ---- write x (non-finite or saturated entries are an error, reported after writing)
    const gj_t big = gj_t(GJ_BIG);
write_b:
    for (int i = 0; i < n; i++) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=GJ_NMAX
#pragma HLS PIPELINE II=1
        gj_t v = x[i];
        if (!(gj_abs(v) < big)) status = GJ_RANGE;
        b[i] = v;
    }
    return status;
}
