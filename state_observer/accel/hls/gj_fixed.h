// Plain C++ emulation of ap_fixed<W, I, AP_TRN, AP_SAT> for the host C model (Vitis HLS uses the real
// ap_fixed, see gauss_jordan.h).  Value = raw / 2^(W - I); raw is a two's-complement W-bit integer held in
// an int64 (so W <= 64 and the bus layout is the same as ap_fixed's).  Products and quotients truncate
// towards minus infinity (AP_TRN); every result saturates to the W-bit range (AP_SAT).
// Portable: 64 x 64 -> 128-bit products and 128 / 64 divisions are done on 32-bit halves, so the same
// code builds on 32-bit ARM (Zynq-7000); products use __int128 where it exists (GJ_FIXED_PORTABLE: never).
#ifndef GJ_FIXED_H
#define GJ_FIXED_H

#include <stdint.h>

namespace gj_detail {

// |a| * |b| as a 128-bit unsigned (hi, lo).
static inline void umul128(uint64_t a, uint64_t b, uint64_t &hi, uint64_t &lo)
{
    const uint64_t a0 = a & 0xffffffffu, a1 = a >> 32, b0 = b & 0xffffffffu, b1 = b >> 32;
    const uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    const uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    lo = (p00 & 0xffffffffu) | (mid << 32);
    hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

static inline uint64_t uabs(int64_t a) { return a < 0 ? (uint64_t)0 - (uint64_t)a : (uint64_t)a; }

}  // namespace gj_detail

template <int W, int I>
struct gj_fixed {
    static const int F = W - I;  // fractional bits
    static_assert(W <= 64 && F >= 1 && F <= 63 && I >= 2, "gj_fixed needs W <= 64 and 1 <= W - I <= 63");
    int64_t raw;

    static int64_t max_raw() { return (int64_t)((((uint64_t)1) << (W - 1)) - 1); }
    static int64_t min_raw() { return -max_raw() - 1; }

    gj_fixed() : raw(0) {}
    gj_fixed(int v) : raw(saturate_shifted(gj_detail::uabs(v), v < 0, 0, F)) {}
    explicit gj_fixed(double v) : raw(from_double(v)) {}

    static gj_fixed from_raw(int64_t r) { gj_fixed x; x.raw = r; return x; }
    double to_double() const { return (double)raw / (double)(((uint64_t)1) << F); }

    static int64_t from_double(double v)
    {
        const double s = v * (double)(((uint64_t)1) << F);
        if (!(s == s)) return 0;
        if (s >= (double)max_raw()) return max_raw();
        if (s <= (double)min_raw()) return min_raw();
        int64_t r = (int64_t)s;  // truncates towards zero; AP_TRN floors
        if ((double)r > s) r -= 1;
        return r;
    }

    // (hi:lo) is a 128-bit magnitude; apply the sign, shift right by `shift` (floor) and saturate;
    // `left` > 0 shifts left instead (used by the int constructor).
    static int64_t saturate_shifted(uint64_t mag_lo, bool negative, uint64_t mag_hi, int left)
    {
        uint64_t hi = mag_hi, lo = mag_lo;
        if (left > 0) {
            hi = (hi << left) | (lo >> (64 - left));
            lo <<= left;
        }
        return clamp(hi, lo, negative);
    }

    static int64_t clamp(uint64_t hi, uint64_t lo, bool negative)
    {
        const uint64_t limit = negative ? ((uint64_t)1) << (W - 1) : (((uint64_t)1) << (W - 1)) - 1;
        if (hi != 0 || lo > limit) return negative ? min_raw() : max_raw();
        return negative ? (int64_t)((uint64_t)0 - lo) : (int64_t)lo;
    }

    static int64_t add_raw(int64_t a, int64_t b)
    {
        // W <= 64: add as 65-bit by checking the signs
        const int64_t s = (int64_t)((uint64_t)a + (uint64_t)b);
        if (a >= 0 && b >= 0 && (s < 0 || s > max_raw())) return max_raw();
        if (a < 0 && b < 0 && (s >= 0 || s < min_raw())) return min_raw();
        return s;
    }

    friend gj_fixed operator+(gj_fixed a, gj_fixed b) { return from_raw(add_raw(a.raw, b.raw)); }
    friend gj_fixed operator-(gj_fixed a, gj_fixed b)
    {
        if (b.raw == min_raw()) return from_raw(add_raw(add_raw(a.raw, max_raw()), 1));
        return from_raw(add_raw(a.raw, -b.raw));
    }
    gj_fixed operator-() const { return gj_fixed() - *this; }

    friend gj_fixed operator*(gj_fixed a, gj_fixed b)
    {
#if defined(__SIZEOF_INT128__) && !defined(GJ_FIXED_PORTABLE)
        // where the compiler has 128-bit integers (x86-64, AArch64): the same result, faster
        const __int128 p = ((__int128)a.raw * b.raw) >> F;  // arithmetic shift: floor
        if (p > (__int128)max_raw()) return from_raw(max_raw());
        if (p < (__int128)min_raw()) return from_raw(min_raw());
        return from_raw((int64_t)p);
#endif
        uint64_t hi, lo;
        const bool negative = (a.raw < 0) != (b.raw < 0);
        gj_detail::umul128(gj_detail::uabs(a.raw), gj_detail::uabs(b.raw), hi, lo);
        // shift the magnitude right by F; for a negative product floor = -ceil(|p| / 2^F)
        const uint64_t mask = (((uint64_t)1) << F) - 1;
        const bool inexact = (lo & mask) != 0;
        uint64_t qlo = (lo >> F) | (hi << (64 - F));
        uint64_t qhi = hi >> F;
        if (negative && inexact) {
            qlo += 1;
            if (qlo == 0) qhi += 1;
        }
        return from_raw(clamp(qhi, qlo, negative));
    }

    // a / b = (|a| 2^F) / |b| by restoring division on the 128-bit numerator (truncated, saturated).
    friend gj_fixed operator/(gj_fixed a, gj_fixed b)
    {
        const bool negative = (a.raw < 0) != (b.raw < 0);
        const uint64_t d = gj_detail::uabs(b.raw);
        if (d == 0) return from_raw(negative ? min_raw() : max_raw());
        const uint64_t n = gj_detail::uabs(a.raw);
        uint64_t nhi = n >> (64 - F), nlo = n << F;  // numerator |a| * 2^F, F in 1..63
        uint64_t qhi = 0, qlo = 0, rem = 0;
        for (int bit = 127; bit >= 0; bit--) {
            const uint64_t top = rem >> 63;
            rem = (rem << 1) | ((bit >= 64 ? (nhi >> (bit - 64)) : (nlo >> bit)) & 1u);
            if (top || rem >= d) {
                rem -= d;
                if (bit >= 64) qhi |= ((uint64_t)1) << (bit - 64);
                else qlo |= ((uint64_t)1) << bit;
            }
        }
        if (negative && rem != 0) {  // floor for negative quotients
            qlo += 1;
            if (qlo == 0) qhi += 1;
        }
        return from_raw(clamp(qhi, qlo, negative));
    }

    gj_fixed &operator+=(gj_fixed o) { *this = *this + o; return *this; }
    gj_fixed &operator-=(gj_fixed o) { *this = *this - o; return *this; }
    gj_fixed &operator*=(gj_fixed o) { *this = *this * o; return *this; }

    friend bool operator<(gj_fixed a, gj_fixed b) { return a.raw < b.raw; }
    friend bool operator>(gj_fixed a, gj_fixed b) { return a.raw > b.raw; }
    friend bool operator<=(gj_fixed a, gj_fixed b) { return a.raw <= b.raw; }
    friend bool operator>=(gj_fixed a, gj_fixed b) { return a.raw >= b.raw; }
    friend bool operator==(gj_fixed a, gj_fixed b) { return a.raw == b.raw; }
    friend bool operator!=(gj_fixed a, gj_fixed b) { return a.raw != b.raw; }
};

#endif
