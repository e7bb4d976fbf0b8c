// C testbench of the Gauss-Jordan kernel (Vitis HLS csim / cosim, and g++ on the host): solves systems
// with known solutions and checks the error codes.  Returns 0 when every check passes, 1 otherwise.
#include <math.h>
#include <stdio.h>

#include "gauss_jordan.h"

#if GJ_PRECISION == GJ_DOUBLE
static const double TOL = 1e-12;  // max |x - x_true| / max |x_true|
#elif GJ_PRECISION == GJ_FLOAT
static const double TOL = 1e-4;
#else
static const double TOL = 1e-8;
#endif

#if GJ_PRECISION == GJ_FIXED
static double to_d(gj_t v) { return v.to_double(); }
#else
static double to_d(gj_t v) { return (double)v; }
#endif

static const int N = 24;  // test size (<= GJ_NMAX)
static gj_t A[GJ_NMAX * GJ_NMAX], b[GJ_NMAX];
static int piv[GJ_NMAX];
static double Ad[N * N], xt[N];
static int failures = 0;

static void check(bool ok, const char *what)
{
    printf("%-58s %s\n", what, ok ? "ok" : "FAILED");
    if (!ok) failures++;
}

// deterministic pseudo-random numbers in [-1, 1)
static unsigned long long seed = 12345;
static double uniform()
{
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(seed >> 11) / 4503599627370496.0 - 1.0;
}

// A: random entries, a small diagonal and rows in a shuffled order (so pivoting is needed); b = A x_true
static void make_system(int n)
{
    for (int i = 0; i < n; i++) {
        xt[i] = uniform();
        for (int j = 0; j < n; j++) Ad[i * n + j] = 0.25 * uniform();
        Ad[i * n + (i * 7 + 3) % n] += 1.0;  // one dominant entry per row, off the diagonal
    }
    for (int i = 0; i < n * n; i++) A[i] = gj_t(Ad[i]);
    for (int i = 0; i < n; i++) {
        double s = 0.0;
        for (int j = 0; j < n; j++) s += Ad[i * n + j] * xt[j];
        b[i] = gj_t(s);
    }
}

static double error(int n)
{
    double e = 0.0, m = 0.0;
    for (int i = 0; i < n; i++) {
        e = fmax(e, fabs(to_d(b[i]) - xt[i]));
        m = fmax(m, fabs(xt[i]));
    }
    return e / m;
}

int main()
{
    char line[128];
    check(gauss_jordan(A, b, piv, N, GJ_MODE_INFO) == GJ_INFO_WORD, "INFO returns the information word");

    make_system(N);
    int status = gauss_jordan(A, b, piv, N, GJ_MODE_FACTOR);
    double e = error(N);
    snprintf(line, sizeof line, "FACTOR solves a %d x %d system (error %.2e, tol %.0e)", N, N, e, TOL);
    check(status == GJ_OK && e < TOL, line);

    // a second right-hand side with the factors left in A and piv
    for (int i = 0; i < N; i++) xt[i] = uniform();
    for (int i = 0; i < N; i++) {
        double s = 0.0;
        for (int j = 0; j < N; j++) s += Ad[i * N + j] * xt[j];
        b[i] = gj_t(s);
    }
    status = gauss_jordan(A, b, piv, N, GJ_MODE_SOLVE);
    e = error(N);
    snprintf(line, sizeof line, "SOLVE reuses the factors (error %.2e)", e);
    check(status == GJ_OK && e < TOL, line);

    // 1 x 1 and the largest size
    A[0] = gj_t(0.5);
    b[0] = gj_t(0.25);
    check(gauss_jordan(A, b, piv, 1, GJ_MODE_FACTOR) == GJ_OK && fabs(to_d(b[0]) - 0.5) < TOL, "1 x 1 system");

    // singular: row 2 = row 0 + row 1
    make_system(N);
    for (int j = 0; j < N; j++) A[2 * N + j] = gj_t(Ad[j] + Ad[N + j]);
    check(gauss_jordan(A, b, piv, N, GJ_MODE_FACTOR) == GJ_SINGULAR, "singular matrix reported as GJ_SINGULAR");
    for (int i = 0; i < N * N; i++) A[i] = gj_t(0);
    check(gauss_jordan(A, b, piv, N, GJ_MODE_FACTOR) == GJ_SINGULAR, "zero matrix reported as GJ_SINGULAR");

    check(gauss_jordan(A, b, piv, 0, GJ_MODE_FACTOR) == GJ_BAD_SIZE, "n = 0 rejected");
    check(gauss_jordan(A, b, piv, GJ_NMAX + 1, GJ_MODE_FACTOR) == GJ_BAD_SIZE, "n > GJ_NMAX rejected");
    check(gauss_jordan(A, b, piv, N, 7) == GJ_BAD_MODE, "unknown mode rejected");
    for (int i = 0; i < N; i++) piv[i] = 0;
    check(gauss_jordan(A, b, piv, N, GJ_MODE_SOLVE) == GJ_BAD_PIVOTS, "SOLVE without factors rejected");

    printf("%s\n", failures ? "TESTBENCH FAILED" : "TESTBENCH PASSED");
    return failures ? 1 : 0;
}
