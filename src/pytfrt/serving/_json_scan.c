/* pytfrt.serving._json_scan: the float32 tensor scan of pytfrt.serving.fast_json in C.
 *
 * ``scan()`` has exactly the contract of ``fast_json._scan_impl`` (the Numba kernel, read its
 * docstring and the module docstring of fast_json): the same arguments, the same status codes,
 * the same relative levels for a piece of a split body, the same per-level arrays, the same
 * 8-tuple result.  fast_json uses it in place of the Numba kernel when this optional extension
 * is built (setup.py), so the split/merge logic in Python is shared by both.
 *
 * Numbers.  The result must be bit-identical to the general path: json.loads (a correctly
 * rounded double, or a Python int), then np.asarray, then float32.  A number is read as a
 * decimal mantissa m (up to 19 significant digits, exact in a uint64) and a decimal exponent; the double v = m * 10^k (or m / 10^-k) is
 * formed from exact powers of ten up to 1e22 with at most four roundings, so it is within two
 * ulps of the decimal, and the correctly rounded double is within 2.5 ulps of v.  When
 * float32(v - t) == float32(v) == float32(v + t) with t = 1.2e-15 |v| (over five ulps), every
 * double in [v - t, v + t] -- the general path's among them -- rounds to that float32 (rounding
 * is monotonic): it is the answer.  Otherwise (the value lies too near a float32 rounding
 * midpoint, or has over 19 significant digits, or an exponent beyond +-66 or of over four
 * digits), a fraction or exponent number is converted exactly as json.loads does it --
 * PyOS_string_to_double, CPython's correctly rounded conversion, called with the GIL taken back
 * for that one number -- then cast to float32; an integer (no '.', no exponent) is refused
 * instead (status 2), since np.asarray rounds an all-integer list int64 -> float32 and a mixed
 * one through float64, and Python ints beyond int64 make an object array.  A float32 overflow
 * (infinity) is refused as in the Numba kernel.
 *
 * Speed.  The scan finds the structural characters ([ ] , }) 64 bytes at a time; between two
 * of them there are only spaces or one number, whose end is then known, so the common number
 * (-?digits[.digits], 19 digits or fewer) is read in 16-byte blocks without a byte loop
 * (SSE2, every x86-64 CPU; elsewhere, and for exponents, digits are read eight at a time).
 *
 * Thread-safety: scan() releases the GIL while it reads (it holds buffer views of its
 * arguments, so they stay alive); concurrent calls must not share the output arrays.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TOP 32                 /* fast_json.MAX_RANK */
#define LEVELS (2 * TOP + 1)   /* fast_json._LEVELS */
#define UNSEEN (-1000)         /* fast_json._NONE */
#define IS_SPACE(c) ((c) == ' ' || (c) == '\n' || (c) == '\r' || (c) == '\t')
#define SLOW_TOKEN_MAX 4096    /* longer fraction/exponent tokens are refused, not converted */

#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SWAR 1 /* eight digits per step (GCC/Clang builtins, little-endian loads) */
#else
#define SWAR 0
#endif

static const double POW10[23] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

typedef struct {
    int64_t status, rank, number_depth, depth, min_depth, min_pos, count, end;
} Result;

typedef struct {
    const unsigned char *buf;
    Py_ssize_t n;
    int64_t *dims, *counts, *partial;
    unsigned char *inherited;
    float *out;
    Py_ssize_t out_size;
    PyThreadState *saved;      /* the thread state while the GIL is released */
} Scan;


/* 10^-k rounded to the nearest double (the compiler reads the literal correctly rounded). */
static const double NEG_POW10[23] = {
    1e-0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11,
    1e-12, 1e-13, 1e-14, 1e-15, 1e-16, 1e-17, 1e-18, 1e-19, 1e-20, 1e-21, 1e-22,
};

static const uint64_t POW10_U64[20] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL,
    1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL,
    100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL,
    1000000000000000000ULL, 10000000000000000000ULL,
};

#if SWAR
/* The value of 8 digit values 0..9, one a byte, the first in the lowest byte: digit pairs, then
 * groups of four, then the eight (no lane overflows: 99 < 2^8, 9999 < 2^16). */
static inline uint64_t eight_value(uint64_t d) {
    d = (d * 10 + (d >> 8)) & 0x00FF00FF00FF00FFULL;
    d = (d * 100 + (d >> 16)) & 0x0000FFFF0000FFFFULL;
    return (d & 0xFFFFFFFFULL) * 10000 + (d >> 32);
}
#endif

/* Digits from buf[*i]: accumulate into *m (wrapping beyond 19 digits; callers count digits).
 * Eight bytes at a time while eight are left: the bytes XOR '0' are 0..9 for digits, and a
 * byte is not a digit iff (its low 7 bits + 0x76) or itself has the top bit set (no carry
 * crosses bytes: 0x7F + 0x76 < 0x100); the digits before the first non-digit are moved to the
 * top of the word (the missing ones become leading zeros) and converted at once. */
static inline void read_digits(const unsigned char *buf, Py_ssize_t n, Py_ssize_t *pi,
                               uint64_t *pm) {
    Py_ssize_t i = *pi;
    uint64_t m = *pm;
#if SWAR
    while (i + 8 <= n) {
        uint64_t x;
        memcpy(&x, buf + i, 8);
        uint64_t d = x ^ 0x3030303030303030ULL;
        uint64_t other = (((d & 0x7F7F7F7F7F7F7F7FULL) + 0x7676767676767676ULL) | d) &
                         0x8080808080808080ULL;
        if (other == 0) {
            m = m * 100000000ULL + eight_value(d);
            i += 8;
            continue;
        }
        unsigned k = (unsigned)__builtin_ctzll(other) >> 3; /* digits before the first other */
        /* Shift by 64 - 8k in two steps (k = 0 shifts everything out). */
        uint64_t top = (d << (63 - 8 * k)) << 1;
        m = m * POW10_U64[k] + eight_value(top);
        *pi = i + k;
        *pm = m;
        return;
    }
#endif
    while (i < n) {
        unsigned d = (unsigned)buf[i] - 48u;
        if (d > 9) break;
        m = m * 10 + d;
        i++;
    }
    *pi = i;
    *pm = m;
}

#if defined(__GNUC__) && defined(__x86_64__) && defined(__SSE2__)
/* SSE2 (every x86-64 CPU): structural characters 64 bytes at a time, and a number token whose
 * end is known read in 16-byte blocks. */
#define VECTOR 1
#include <emmintrin.h>

static const unsigned char KEEP_LAST[32] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
};

static inline uint32_t structural16(__m128i v) {
    __m128i hit = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(',')), _mm_cmpeq_epi8(v, _mm_set1_epi8('['))),
        _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(']')), _mm_cmpeq_epi8(v, _mm_set1_epi8('}'))));
    return (uint32_t)_mm_movemask_epi8(hit);
}

/* Bits for the bytes of p[0:64] that are ',', '[', ']' or '}'. */
static inline uint64_t structural64(const unsigned char *p) {
    return (uint64_t)structural16(_mm_loadu_si128((const __m128i *)p)) |
           (uint64_t)structural16(_mm_loadu_si128((const __m128i *)(p + 16))) << 16 |
           (uint64_t)structural16(_mm_loadu_si128((const __m128i *)(p + 32))) << 32 |
           (uint64_t)structural16(_mm_loadu_si128((const __m128i *)(p + 48))) << 48;
}

/* The value of the k <= 16 digits ending right before end (end - 16 >= the buffer's start):
 * the 16 bytes before end minus '0', the first 16 - k zeroed, widened to 16 bits, then pairs,
 * fours and eights summed by multiply-adds (every partial sum fits an int16 or int32). */
static inline uint64_t block_value(const unsigned char *end, unsigned k) {
    const __m128i zero = _mm_setzero_si128();
    __m128i d = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)(end - 16)), _mm_set1_epi8('0'));
    d = _mm_and_si128(d, _mm_loadu_si128((const __m128i *)(KEEP_LAST + k)));
    __m128i ten = _mm_set1_epi32(0x0001000A); /* (10, 1) pairs of int16 */
    __m128i pairs = _mm_packs_epi32(_mm_madd_epi16(_mm_unpacklo_epi8(d, zero), ten),
                                    _mm_madd_epi16(_mm_unpackhi_epi8(d, zero), ten));
    __m128i fours = _mm_madd_epi16(pairs, _mm_set1_epi32(0x00010064));           /* 100 a + b */
    __m128i eights = _mm_madd_epi16(_mm_packs_epi32(fours, fours),
                                    _mm_set1_epi32(0x00012710));                  /* 10^4 a + b */
    uint64_t both = (uint64_t)_mm_cvtsi128_si64(eights);
    return (both & 0xFFFFFFFFULL) * 100000000ULL + (both >> 32);
}

/* The value of the k <= 19 digits ending right before end (end - k - 16 >= buffer start). */
static inline uint64_t digits_value(const unsigned char *end, unsigned k) {
    if (k <= 16) return block_value(end, k);
    return block_value(end - 16, k - 16) * 10000000000000000ULL + block_value(end, 16);
}
#else
#define VECTOR 0
#endif

/* The exact conversion of json.loads for the token buf[from:to] (GIL taken back): 0 with
 * *value set, or -1 (not a number CPython reads whole: refuse). */
static int exact_double(Scan *s, Py_ssize_t from, Py_ssize_t to, double *value) {
    char local[64];
    Py_ssize_t len = to - from;
    char *text = len < (Py_ssize_t)sizeof(local) ? local : (char *)malloc((size_t)len + 1);
    int ok = -1;
    if (text == NULL) return -1;
    memcpy(text, s->buf + from, (size_t)len);
    text[len] = '\0';
    PyEval_RestoreThread(s->saved);
    char *end = NULL;
    double v = PyOS_string_to_double(text, &end, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
    } else if (end == text + len) {
        *value = v;
        ok = 0;
    }
    s->saved = PyEval_SaveThread();
    if (text != local) free(text);
    return ok;
}

/* The float32 of the number buf[token:end] = (-1)^negative mantissa 10^scale (see the top
 * comment; exact: the mantissa and exponent are within the fast arithmetic's limits): 0 with
 * *single set, or 2 (refused). */
static inline int convert(Scan *s, uint64_t mantissa, int64_t scale, int negative, int integer,
                          int exact, Py_ssize_t token, Py_ssize_t end, float *single) {
    float f;
    if (exact && mantissa == 0) {
        f = 0.0f;
        if (integer) negative = 0; /* the int -0 is 0; the floats -0.0, -0e0 keep the sign */
        *single = negative ? -f : f;
        return 0;
    }
    int settled = 0;
    if (exact && scale <= 66 && scale >= -66) {
        /* Powers of ten up to 1e22 are exact doubles, and 10^-k for k <= 22 is one rounding
         * away: at most 4 roundings in all. */
        double value = (int64_t)mantissa >= 0 ? (double)(int64_t)mantissa : (double)mantissa;
        if (scale < 0 && scale >= -22) {
            value *= NEG_POW10[-scale];
        } else {
            int64_t left = scale >= 0 ? scale : -scale;
            while (left > 0) {
                int64_t step = left <= 22 ? left : 22;
                if (scale >= 0) {
                    value *= POW10[step];
                } else {
                    value /= POW10[step];
                }
                left -= step;
            }
        }
        f = (float)value;
        uint64_t bits;
        memcpy(&bits, &value, 8);
        uint64_t biased = bits >> 52; /* value > 0: no sign bit */
        if (biased >= 1023 - 126 && biased <= 1023 + 127) {
            /* A normal float32 keeps the top 23 of the 52 fraction bits: the value is far from
             * a float32 rounding midpoint iff the 29 dropped bits are over 64 (double) ulps
             * from half.  The scale changes only at a power of two, a float32 value, not a
             * midpoint. */
            uint32_t dropped = (uint32_t)(bits & 0x1FFFFFFFu);
            settled = dropped - 0x10000000u + 64u > 128u;
        } else {
            double slack = value * 1.2e-15;
            settled = (float)(value - slack) == f && (float)(value + slack) == f;
        }
        if (settled && negative) f = -f;
    }
    if (!settled) {
        double value;
        if (integer || end - token > SLOW_TOKEN_MAX) return 2;
        if (exact_double(s, token, end, &value) != 0) return 2;
        f = (float)value;
    }
    if (isinf(f)) return 2; /* the float32 overflows */
    *single = f;
    return 0;
}

/* The number -?digits[.digits][(e|E)[+-]digits] at buf[i] (read up to the buffer's end): its
 * end, or -1 (not JSON: status 1) or -2 (refused: status 2); *single set. */
static Py_ssize_t parse_number(Scan *s, Py_ssize_t i, float *single) {
    const unsigned char *buf = s->buf;
    const Py_ssize_t n = s->n;
    Py_ssize_t token = i;
    int negative = buf[i] == '-'; /* branch-free: the sign of data is random */
    i += negative;
    if (i + 1 < n && buf[i] == '0' && buf[i + 1] >= '0' && buf[i + 1] <= '9') {
        return -1; /* a leading zero: not JSON */
    }
    Py_ssize_t int_start = i;
    uint64_t mantissa = 0;
    read_digits(buf, n, &i, &mantissa);
    Py_ssize_t int_end = i;
    if (int_end == int_start) return -1;
    Py_ssize_t frac_start = i;
    int integer = 1; /* no fraction, no exponent: json.loads makes it an int */
    if (i < n && buf[i] == '.') {
        integer = 0;
        i++;
        frac_start = i;
        read_digits(buf, n, &i, &mantissa);
        if (i == frac_start) return -1;
    }
    int64_t scale = (int64_t)(frac_start - i);
    int64_t digits = (int64_t)(int_end - int_start) - scale;
    int has_exponent = i < n && (buf[i] == 'e' || buf[i] == 'E');
    int exact = 1; /* the mantissa and exponent are within the fast path's limits */
    if (digits > 18) {
        /* Leading zeros do not count. */
        Py_ssize_t first = int_start;
        while (first < int_end && buf[first] == '0') first++;
        if (first == int_end) {
            first = frac_start;
            while (first < i && buf[first] == '0') first++;
            digits = (int64_t)(i - first);
        } else {
            digits = (int64_t)(int_end - first) - scale;
        }
        if (digits > 19) exact = 0;
        /* An integer of 19 digits may pass int64: np.asarray then makes uint64 or object
         * arrays, which the general path reports. */
        if (integer && digits > 18 && !has_exponent) return -2;
    }
    if (has_exponent) {
        integer = 0;
        i++;
        int64_t esign = 1;
        if (i < n && (buf[i] == '+' || buf[i] == '-')) {
            if (buf[i] == '-') esign = -1;
            i++;
        }
        int64_t exponent = 0;
        Py_ssize_t exp_start = i;
        while (i < n && buf[i] >= '0' && buf[i] <= '9') {
            if (i - exp_start < 9) exponent = exponent * 10 + (buf[i] - '0');
            i++;
        }
        if (i == exp_start) return -1;
        if (i - exp_start > 4) exact = 0;
        scale += esign * exponent;
    }
    if (convert(s, mantissa, scale, negative, integer, exact, token, i, single) != 0) return -2;
    return i;
}

/* The number token buf[a:b] (spaces trimmed) of the common form -?digits[.digits] with 19
 * digits or fewer, read in 16-byte blocks: 1 with *single set, 0 for anything else (parse_number
 * then reads it), or -2 (refused). */
static inline int fast_token(Scan *s, Py_ssize_t a, Py_ssize_t b, float *single) {
#if VECTOR
    const unsigned char *buf = s->buf;
    Py_ssize_t len = b - a;
    if (a < 32 || a + 32 > s->n || len > 21) return 0;
    __m128i lo = _mm_loadu_si128((const __m128i *)(buf + a));
    __m128i hi = _mm_loadu_si128((const __m128i *)(buf + a + 16));
    const __m128i zero = _mm_set1_epi8('0'), nine = _mm_set1_epi8(9), dot = _mm_set1_epi8('.');
    __m128i dlo = _mm_sub_epi8(lo, zero), dhi = _mm_sub_epi8(hi, zero);
    uint32_t digit = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(dlo, nine), dlo)) |
                     (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(dhi, nine), dhi))
                         << 16;
    uint32_t dots = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(lo, dot)) |
                    (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(hi, dot)) << 16;
    int negative = buf[a] == '-';
    uint32_t body = (((uint32_t)1 << len) - 1) & ~(uint32_t)negative;
    dots &= body;
    if (((digit & body) | dots) != body || (dots & (dots - 1)) != 0) return 0;
    unsigned whole, frac;
    if (dots == 0) {
        whole = (unsigned)len - (unsigned)negative;
        frac = 0;
    } else {
        unsigned at = (unsigned)__builtin_ctz(dots);
        whole = at - (unsigned)negative;
        frac = (unsigned)len - at - 1;
    }
    if (whole == 0 || (whole > 1 && buf[a + negative] == '0') || whole + frac > 19 ||
        (frac == 0 && (dots != 0 || whole > 18))) {
        return 0;
    }
    const unsigned char *int_end = buf + a + negative + whole;
    uint64_t mantissa = digits_value(int_end, whole);
    if (frac > 0) mantissa = mantissa * POW10_U64[frac] + digits_value(buf + b, frac);
    return convert(s, mantissa, -(int64_t)frac, negative, frac == 0, 1, a, b, single) == 0 ? 1
                                                                                           : -2;
#else
    (void)s, (void)a, (void)b, (void)single;
    return 0;
#endif
}

#define FAIL(code)                         \
    do {                                   \
        memset(r, 0, sizeof(*r));          \
        r->status = (code);                \
        r->end = i;                        \
        return;                            \
    } while (0)

/* The scan (the contract of fast_json._scan_impl).  Structural characters ([ ] , and }) are
 * found 64 bytes at a time; the bytes between two of them are spaces, or a number (with spaces
 * around it), which is read knowing where it ends. */
static void scan(Scan *s, Py_ssize_t start, Py_ssize_t stop, int suffix, Result *r) {
    const unsigned char *buf = s->buf;
    int64_t *dims = s->dims, *counts = s->counts, *partial = s->partial;
    unsigned char *inherited = s->inherited;
    unsigned char expect[LEVELS];
    int64_t depth = 0, rank = UNSEEN, number_depth = UNSEEN, count = 0, min_depth = 0;
    Py_ssize_t min_pos = start;
    Py_ssize_t i = start;      /* the first byte not handled yet */
    Py_ssize_t block = start;  /* the next block to look for structural characters in */
    Py_ssize_t base = start;   /* where the bits of mask start */
    uint64_t mask = 0;         /* structural characters in [base, base + 64) not handled yet */
    memset(expect, 0, sizeof(expect));
    memset(inherited, 0, LEVELS);
    if (suffix) {
        memset(inherited, 1, TOP + 1); /* levels <= 0: lists opened before start */
        expect[TOP] = 1;               /* right after a comma */
    }
    for (;;) {
        Py_ssize_t q; /* the next structural character, or stop */
        while (mask == 0 && block < stop) {
            base = block;
#if VECTOR
            if (stop - block >= 64) {
                mask = structural64(buf + block);
                block += 64;
                continue;
            }
#endif
            Py_ssize_t len = stop - block < 64 ? stop - block : 64;
            for (Py_ssize_t j = 0; j < len; j++) {
                unsigned char c = buf[block + j];
                if (c == ',' || c == '[' || c == ']' || c == '}') mask |= (uint64_t)1 << j;
            }
            block += len;
        }
        if (mask != 0) {
            q = base + __builtin_ctzll(mask);
            mask &= mask - 1;
        } else {
            q = stop;
        }
        /* The bytes before q: spaces or one number. */
        Py_ssize_t a = i, b = q;
        while (a < b && IS_SPACE(buf[a])) a++;
        if (a < b) {
            while (IS_SPACE(buf[b - 1])) b--;
            i = a;
            int64_t k = depth + TOP;
            if ((depth == 0 && !suffix) || !expect[k]) FAIL(1);
            if (rank != UNSEEN && depth != rank) FAIL(1); /* a number beside lists */
            if (number_depth == UNSEEN) {
                number_depth = depth;
            } else if (depth != number_depth) {
                FAIL(1);
            }
            float single;
            int taken = fast_token(s, a, b, &single);
            if (taken == 0) {
                Py_ssize_t end = parse_number(s, a, &single);
                if (end < 0) FAIL((int)-end);
                if (end != b) FAIL(1); /* not one number */
            } else if (taken < 0) {
                FAIL(2);
            }
            if (count >= s->out_size) FAIL(2);
            s->out[count] = single;
            count++;
            counts[k] += 1;
            expect[k] = 0;
        }
        i = q;
        if (q >= stop) break;
        unsigned char c = buf[q];
        if (c == '[') {
            if (number_depth != UNSEEN && depth >= number_depth) FAIL(1); /* beside numbers */
            if (suffix || depth > 0) {
                if (!expect[depth + TOP]) FAIL(1);
                expect[depth + TOP] = 0;
                counts[depth + TOP] += 1;
            }
            depth++;
            if (depth > TOP) FAIL(1);
            counts[depth + TOP] = 0;
            expect[depth + TOP] = 1;
            inherited[depth + TOP] = 0;
            i++;
            continue;
        }
        if (c == ']') {
            if (depth <= (suffix ? -TOP + 1 : 0)) FAIL(1);
            int64_t k = depth + TOP;
            int64_t items = counts[k];
            if (expect[k] && (items > 0 || inherited[k])) FAIL(1); /* trailing comma */
            if (rank == UNSEEN) rank = depth; /* the first list to close is the deepest */
            if (depth > rank) FAIL(1);
            if (inherited[k]) {
                partial[k] = items;
                inherited[k] = 0;
            } else if (dims[k] == -1) {
                dims[k] = items;
            } else if (dims[k] != items) {
                FAIL(1); /* ragged */
            }
            depth--;
            i++;
            if (depth < min_depth) {
                min_depth = depth;
                min_pos = i;
            }
            if (depth == 0 && !suffix) {
                r->status = 0;
                goto done;
            }
            continue;
        }
        if (c == ',') {
            int64_t k = depth + TOP;
            if ((depth == 0 && !suffix) || expect[k] || (counts[k] == 0 && !inherited[k])) FAIL(1);
            expect[k] = 1;
            i++;
            continue;
        }
        /* '}' */
        if (!suffix) FAIL(1);
        r->status = 0; /* the end of the body */
        goto done;
    }
    if (suffix) {
        r->status = 0;
    } else {
        r->status = stop < s->n ? 3 : 1;
    }
done:
    r->rank = rank;
    r->number_depth = number_depth;
    r->depth = depth;
    r->min_depth = min_depth;
    r->min_pos = min_pos;
    r->count = count;
    r->end = i;
}

#undef FAIL

/* -- the Python entry point ----------------------------------------------------------------- */

static int get_view(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t itemsize,
                    const char *formats, Py_ssize_t min_len, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) != 0) return -1;
    const char *format = view->format ? view->format : "B";
    if (format[0] == '<' || format[0] == '=' || format[0] == '@') format++;
    if (view->itemsize != itemsize || strlen(format) != 1 || strchr(formats, format[0]) == NULL ||
        view->len / itemsize < min_len) {
        PyErr_Format(PyExc_TypeError, "scan: %s must be a contiguous %s array of %zd or more items",
                     what, formats, min_len);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(scan_doc,
"scan(buf, start, stop, suffix, pow10, dims, counts, partial, inherited, out, /)\n"
"--\n\n"
"Scan buf[start:stop] -> (status, rank, number_depth, depth, min_depth, min_pos, count, end).\n\n"
"The contract of pytfrt.serving.fast_json._scan_impl (pow10 is accepted and unused).  buf: a\n"
"bytes-like object; dims, counts, partial: int64 arrays and inherited: a bool array, of\n"
"2 * 32 + 1 items; out: a float32 array.  Releases the GIL while it scans.  Raises TypeError\n"
"for arguments of the wrong kind and ValueError for offsets outside buf.");

static PyObject *py_scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError, "scan() takes 10 arguments (%zd given)", nargs);
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t stop = PyLong_AsSsize_t(args[2]);
    if (stop == -1 && PyErr_Occurred()) return NULL;
    int suffix = PyObject_IsTrue(args[3]);
    if (suffix < 0) return NULL;
    Py_buffer views[6];
    int got = 0;
    PyObject *result = NULL;
    if (get_view(args[0], &views[0], 0, 1, "Bbc", 0, "buf") != 0) goto out;
    got = 1;
    if (get_view(args[5], &views[1], 1, 8, "lq", LEVELS, "dims") != 0) goto out;
    got = 2;
    if (get_view(args[6], &views[2], 1, 8, "lq", LEVELS, "counts") != 0) goto out;
    got = 3;
    if (get_view(args[7], &views[3], 1, 8, "lq", LEVELS, "partial") != 0) goto out;
    got = 4;
    if (get_view(args[8], &views[4], 1, 1, "?", LEVELS, "inherited") != 0) goto out;
    got = 5;
    if (get_view(args[9], &views[5], 1, 4, "f", 0, "out") != 0) goto out;
    got = 6;
    if (start < 0 || stop < start || stop > views[0].len) {
        PyErr_SetString(PyExc_ValueError, "scan: start/stop outside the buffer");
        goto out;
    }
    {
        Scan s;
        Result r;
        memset(&r, 0, sizeof(r));
        s.buf = (const unsigned char *)views[0].buf;
        s.n = views[0].len;
        s.dims = (int64_t *)views[1].buf;
        s.counts = (int64_t *)views[2].buf;
        s.partial = (int64_t *)views[3].buf;
        s.inherited = (unsigned char *)views[4].buf;
        s.out = (float *)views[5].buf;
        s.out_size = views[5].len / 4;
        s.saved = PyEval_SaveThread();
        scan(&s, start, stop, suffix, &r);
        PyEval_RestoreThread(s.saved);
        result = Py_BuildValue("(LLLLLLLL)", (long long)r.status, (long long)r.rank,
                               (long long)r.number_depth, (long long)r.depth,
                               (long long)r.min_depth, (long long)r.min_pos,
                               (long long)r.count, (long long)r.end);
    }
out:
    for (int j = 0; j < got; j++) PyBuffer_Release(&views[j]);
    return result;
}

/* -- the response: float32 arrays as json.dumps writes their tolist() ---------------------- */

typedef unsigned __int128 u128;

static u128 POW10_128[39]; /* 10^0 .. 10^38 (filled at import) */
static u128 POW5_128[45];  /* 5^0 .. 5^44 */

static void fill_tables(void) {
    POW10_128[0] = 1;
    for (int k = 1; k < 39; k++) POW10_128[k] = POW10_128[k - 1] * 10;
    POW5_128[0] = 1;
    for (int k = 1; k < 45; k++) POW5_128[k] = POW5_128[k - 1] * 5;
}

/* Python's repr of the double f (a float32 value, finite, not zero) into out (sign included):
 * the shortest decimal that reads back as that double, the nearest such if several, in
 * repr's notation.  Returns the length, or 0 when this exact integer method does not apply
 * (the caller then asks PyOS_double_to_string): a power of two (its rounding interval is
 * lopsided), a value below 2^-44 times its odd mantissa (5^F would overflow 128 bits) or a tie
 * between two shortest candidates.
 *
 * f = M 2^E with M odd; as a decimal N / 10^F (F = max(0, -E), N = M 5^F or M 2^E, exact in
 * 128 bits).  The double's rounding interval is f +- h with h = 2^(e - 53), e = floor(log2 f);
 * its ends read back as f (round-half-even: the double's last bit is 0, as every float32 has
 * at most 24 significant bits).  In units of 10^-F, h = 5^F 2^g with g = e - 53 + F.  An
 * n-digit decimal within h of f exists iff the nearest one, N rounded to n digits, is, and
 * then every longer one is too: n goes down from 17 (or N's own digits) while it holds. */
static Py_ssize_t float_repr(float value, char *out) {
    uint32_t bits;
    memcpy(&bits, &value, 4);
    int negative = (int)(bits >> 31);
    uint32_t biased = (bits >> 23) & 0xFF;
    uint32_t m = bits & 0x7FFFFF;
    int e2;
    if (biased == 0) {
        e2 = -149;
    } else {
        m |= 0x800000;
        e2 = (int)biased - 150;
    }
    int zeros = __builtin_ctz(m);
    m >>= zeros;
    e2 += zeros;
    if (m == 1 || e2 < -44) return 0;
    int bitlen = 32 - __builtin_clz(m);
    int F = e2 < 0 ? -e2 : 0;
    u128 N = (u128)m;
    u128 five = POW5_128[F];
    if (e2 < 0) {
        N *= five;
    } else {
        N <<= e2;
    }
    int g = (e2 + bitlen - 1) - 53 + F;
    /* D: the digits of N. */
    const u128 *p10 = POW10_128;
    int D = 1;
    while (D < 39 && N >= p10[D]) D++;
    int best_n = 0;
    u128 best_q = 0;
    int best_carry = 0;
    int n = D < 17 ? D : 17;
    for (; n >= 1; n--) {
        int t = D - n;
        u128 q, dist;
        int carry = 0;
        if (t == 0) {
            q = N;
            dist = 0;
        } else {
            u128 unit = p10[t];
            q = N / unit;
            u128 r = N - q * unit;
            u128 half = unit / 2;
            if (r == half) return 0; /* a tie: leave it to CPython */
            if (r > half) {
                q += 1;
                dist = unit - r;
                if (q == p10[n]) carry = 1;
            } else {
                dist = r;
            }
        }
        int ok;
        if (g >= 0) {
            ok = dist <= ((u128)1 << g) * five;
        } else {
            int s = -g;
            if (dist > (five >> s) + 1) {
                ok = 0;
            } else {
                ok = (dist << s) <= five;
            }
        }
        if (!ok) break;
        best_n = n;
        best_q = q;
        best_carry = carry;
    }
    if (best_n == 0) return 0;
    /* digits of best_q (best_n of them, or a 1 and zeros after a carry) */
    char digits[40];
    int nd = best_n;
    int decpt = D - F;
    if (best_carry) {
        best_q = 1;
        nd = 1;
        decpt += 1;
    } else {
        for (int k = nd - 1; k >= 0; k--) {
            digits[k] = (char)('0' + (int)(best_q % 10));
            best_q /= 10;
        }
    }
    if (best_carry) digits[0] = '1';
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char *p = out;
    if (negative) *p++ = '-';
    if (decpt <= -4 || decpt > 16) {
        int exp10 = decpt - 1;
        *p++ = digits[0];
        if (nd > 1) {
            *p++ = '.';
            memcpy(p, digits + 1, (size_t)(nd - 1));
            p += nd - 1;
        }
        *p++ = 'e';
        *p++ = exp10 < 0 ? '-' : '+';
        int a = exp10 < 0 ? -exp10 : exp10;
        if (a >= 100) *p++ = (char)('0' + a / 100);
        *p++ = (char)('0' + a / 10 % 10);
        *p++ = (char)('0' + a % 10);
    } else if (decpt <= 0) {
        *p++ = '0';
        *p++ = '.';
        for (int k = 0; k < -decpt; k++) *p++ = '0';
        memcpy(p, digits, (size_t)nd);
        p += nd;
    } else if (decpt >= nd) {
        memcpy(p, digits, (size_t)nd);
        p += nd;
        for (int k = 0; k < decpt - nd; k++) *p++ = '0';
        *p++ = '.';
        *p++ = '0';
    } else {
        memcpy(p, digits, (size_t)decpt);
        p += decpt;
        *p++ = '.';
        memcpy(p, digits + decpt, (size_t)(nd - decpt));
        p += nd - decpt;
    }
    return p - out;
}

/* One float32 as json.dumps writes the Python float: NaN, Infinity, -Infinity, 0.0, -0.0, or
 * repr.  Returns the length (at most 32), or -1 with an exception (GIL held). */
static Py_ssize_t write_float(float value, char *out) {
    if (isnan(value)) {
        memcpy(out, "NaN", 3);
        return 3;
    }
    if (isinf(value)) {
        if (value < 0) {
            memcpy(out, "-Infinity", 9);
            return 9;
        }
        memcpy(out, "Infinity", 8);
        return 8;
    }
    if (value == 0.0f) {
        if (signbit(value)) {
            memcpy(out, "-0.0", 4);
            return 4;
        }
        memcpy(out, "0.0", 3);
        return 3;
    }
    Py_ssize_t len = float_repr(value, out);
    if (len > 0) return len;
    char *text = PyOS_double_to_string((double)value, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (text == NULL) return -1;
    len = (Py_ssize_t)strlen(text);
    memcpy(out, text, (size_t)len);
    PyMem_Free(text);
    return len;
}

PyDoc_STRVAR(dumps_doc,
"dumps_float32(array, /)\n"
"--\n\n"
"The bytes json.dumps(array.tolist(), separators=(',', ':')) gives for a C-contiguous float32\n"
"array of rank 1 to 32, not empty (nested lists; NaN/Infinity as json.dumps writes them).\n"
"Raises TypeError for anything else.");

static PyObject *py_dumps_float32(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) return NULL;
    const char *format = view.format ? view.format : "B";
    if (format[0] == '<' || format[0] == '=' || format[0] == '@') format++;
    if (view.itemsize != 4 || strcmp(format, "f") != 0 || view.ndim < 1 || view.ndim > TOP) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "dumps_float32: a C-contiguous float32 array of rank "
                                         "1 to 32 is needed");
        return NULL;
    }
    Py_ssize_t count = view.len / 4;
    int ndim = view.ndim;
    if (count == 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "dumps_float32: an empty array");
        return NULL;
    }
    /* Each number takes at most 32 bytes and a comma; each list two brackets. */
    Py_ssize_t lists = 1, per = 1;
    for (int d = 0; d < ndim - 1; d++) {
        per *= view.shape[d];
        lists += per;
    }
    Py_ssize_t capacity = count * 33 + lists * 3 + 16;
    PyObject *result = PyBytes_FromStringAndSize(NULL, capacity);
    if (result == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    char *start = PyBytes_AS_STRING(result), *p = start;
    const float *data = (const float *)view.buf;
    Py_ssize_t index[TOP];
    memset(index, 0, sizeof(index));
    {
        for (int d = 0; d < ndim; d++) *p++ = '[';
        Py_ssize_t inner = view.shape[ndim - 1];
        for (Py_ssize_t k = 0; k < count; k += inner) {
            for (Py_ssize_t j = 0; j < inner; j++) {
                Py_ssize_t len = write_float(data[k + j], p);
                if (len < 0) {
                    Py_DECREF(result);
                    PyBuffer_Release(&view);
                    return NULL;
                }
                p += len;
                *p++ = ',';
            }
            p[-1] = ']';
            /* close the finished outer lists, open the next ones */
            int d = ndim - 2;
            while (d >= 0 && ++index[d] == view.shape[d]) {
                *p++ = ']';
                index[d] = 0;
                d--;
            }
            if (d >= 0) {
                *p++ = ',';
                for (int e = d + 1; e < ndim; e++) *p++ = '[';
            }
        }
    }
    PyBuffer_Release(&view);
    if (_PyBytes_Resize(&result, p - start) != 0) return NULL;
    return result;
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))py_scan, METH_FASTCALL, scan_doc},
    {"dumps_float32", py_dumps_float32, METH_O, dumps_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pytfrt.serving._json_scan",
    "The float32 tensor scan of pytfrt.serving.fast_json in C (see _json_scan.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__json_scan(void) {
    fill_tables();
    PyObject *mod = PyModule_Create(&module);
    if (mod != NULL && PyModule_AddIntConstant(mod, "vector", VECTOR) != 0) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
