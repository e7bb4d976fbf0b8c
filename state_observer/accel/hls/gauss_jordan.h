// Gauss-Jordan linear solve A x = b for the Newton iteration of the ALI3-P integrator: the kernel of the
// FPGA variant (Vitis HLS top function `gauss_jordan`) and, compiled with g++, its C model on the host.
//
// Build-time choices (preprocessor macros, all optional):
//   GJ_NMAX       largest system (default 96: the detailed vehicle model has n = 82, the 14-DOF model 14)
//   GJ_PRECISION  GJ_DOUBLE (0, default), GJ_FLOAT (1) or GJ_FIXED (2)
//   GJ_FIXED_W, GJ_FIXED_I   fixed-point word and integer bits (default 64 and 24: ap_fixed<64, 24>)
//   GJ_UNROLL     columns updated per clock in the elimination (HLS; default 4)
//   GJ_USE_AP_FIXED          use Vitis HLS' ap_fixed also in C simulation (synthesis always does)
//   GJ_PIVOT_TOL  singularity threshold in units of eps max|A| (see GJ_SINGULAR)
#ifndef GAUSS_JORDAN_H
#define GAUSS_JORDAN_H

#define GJ_DOUBLE 0
#define GJ_FLOAT 1
#define GJ_FIXED 2

#ifndef GJ_NMAX
#define GJ_NMAX 96
#endif
#define GJ_DEPTH_A (GJ_NMAX * GJ_NMAX)
#ifndef GJ_PRECISION
#define GJ_PRECISION GJ_DOUBLE
#endif
#ifndef GJ_FIXED_W
#define GJ_FIXED_W 64
#endif
#ifndef GJ_FIXED_I
#define GJ_FIXED_I 24
#endif
#ifndef GJ_UNROLL
#define GJ_UNROLL 4
#endif

// mode argument
#define GJ_MODE_FACTOR 0  // factor A (written back in product form) and solve for b
#define GJ_MODE_SOLVE 1   // solve for another b with the factors a FACTOR call left in A and piv
#define GJ_MODE_INFO 2    // only return the information word below

// return value (AXI-Lite ap_return)
#define GJ_OK 0
#define GJ_SINGULAR 1   // a pivot |p| <= GJ_PIVOT_TOL eps max|A|, or 1/p out of the fixed-point range
// GJ_PIVOT_TOL defaults to n for double and fixed point (the pivot of a singular matrix is rounding noise
// of up to ~n eps max|A|) and to 1 for float32: the detailed vehicle model's tangent, row-scaled, has
// pivots down to ~100 eps max|A| in float32, which n eps would call singular.
#define GJ_RANGE 2      // non-finite (float types) or saturated (fixed point) entry in x
#define GJ_BAD_SIZE 3   // n < 1 or n > GJ_NMAX
#define GJ_BAD_PIVOTS 4 // SOLVE with a pivot list no FACTOR call wrote
#define GJ_BAD_MODE 5

// GJ_MODE_INFO returns GJ_NMAX | precision << 16 | fixed integer bits << 20 | interface version << 28
#define GJ_INTERFACE_VERSION 1
#define GJ_INFO_WORD (GJ_NMAX | (GJ_PRECISION << 16) | (GJ_FIXED_I << 20) | (GJ_INTERFACE_VERSION << 28))

#if GJ_PRECISION == GJ_DOUBLE
typedef double gj_t;
#elif GJ_PRECISION == GJ_FLOAT
typedef float gj_t;
#elif GJ_PRECISION == GJ_FIXED
#if defined(__SYNTHESIS__) || defined(GJ_USE_AP_FIXED)
#include <ap_fixed.h>
typedef ap_fixed<GJ_FIXED_W, GJ_FIXED_I, AP_TRN, AP_SAT> gj_t;
#else
#include "gj_fixed.h"
typedef gj_fixed<GJ_FIXED_W, GJ_FIXED_I> gj_t;
#endif
#else
#error "GJ_PRECISION must be GJ_DOUBLE, GJ_FLOAT or GJ_FIXED"
#endif

// Solve A x = b (A: n x n row-major, packed with leading dimension n; b: n, overwritten with x).
// FACTOR overwrites A with the Gauss-Jordan factors (product form of the inverse: column k holds the
// k-th elimination's multipliers, the diagonal the reciprocal pivots) and piv with the row exchanges;
// SOLVE applies them to a new b in O(n^2).  Returns GJ_OK or an error code above.
int gauss_jordan(gj_t A[GJ_NMAX * GJ_NMAX], gj_t b[GJ_NMAX], int piv[GJ_NMAX], int n, int mode);

#endif
