"""float32 GELU (the ``erf`` form) in place over a block of rows, as a C function for native code.

Private helper of :mod:`pytfrt.backends.cpu._dnnl_matmul`.  A Transformer's first MLP
projection (BERT: ``128 x 768 x 3072`` per layer) ends in a GELU.  As oneDNN's ``gelu_erf``
post-op of the column parts' ``gemm:jit:f32`` primitives it cost 4% of the product on one
thread but 9-18% with both threads running parts at once (docs/kernels.md, "GELU after the
column parts").  The parts now run without the post-op and the spin pool applies this
function to each part's block of the output right after the primitive, while the block is in
the thread's cache (``_spin_pool``'s ``ACT_FN``, as the convolutions' SiLU).

The function: ``int gelu_rows_f32(float *y, int64 geometry)`` (returns 0), ``geometry`` =
``rows | width << 20 | stride << 40`` (:func:`geometry`): ``rows`` rows of ``width`` floats,
``stride`` floats apart.  ``gelu(x) = x / 2 * (1 + erf(x / sqrt 2))`` with ``erf`` by
Abramowitz and Stegun's 7.1.26 (``1 - t (a1 + t (a2 + ...)) exp(-z^2)``,
``t = 1 / (1 + p z)``: absolute error below 1.5e-7, the approximation oneDNN's own post-op
uses), ``1 - erf`` formed without cancellation for negative ``x`` and ``exp(-z^2)`` taken as
0 below ``exp(-80)`` (no subnormal outputs).  AVX-512 only (``scalef``, masked tails);
:func:`address` is 0 (the caller keeps oneDNN's post-op) on other CPUs, without a C
compiler, or with :data:`ENABLED` false.  Thread-safe (a pure function of its block).
"""

from __future__ import annotations

from pytfrt.backends.cpu import _ccompile
from pytfrt.backends.cpu._softmax_native import native_address, with_module

ENABLED = True
"""Whether float32 ``gelu`` epilogues of dense layers use :func:`address`'s function (read
when a layer's primitives are made; ``False``: oneDNN's ``gelu_erf`` post-op)."""

MAX_DIM = 1 << 20
"""Rows and width of a block must be below this (and the stride below 2^23) to fit the
packed geometry."""

SOURCE = r"""
EXP_AVX512

__attribute__((target("avx512f,avx512dq"), optimize("O3")))
static int gelu_rows_f32(float *y, int64_t geometry) {
    const int64_t rows = geometry & 0xFFFFF, width = (geometry >> 20) & 0xFFFFF;
    const int64_t stride = geometry >> 40;
    const __m512 rsqrt2 = _mm512_set1_ps(0.70710678118654752f), p = _mm512_set1_ps(0.3275911f);
    const __m512 a1 = _mm512_set1_ps(0.254829592f), a2 = _mm512_set1_ps(-0.284496736f);
    const __m512 a3 = _mm512_set1_ps(1.421413741f), a4 = _mm512_set1_ps(-1.453152027f);
    const __m512 a5 = _mm512_set1_ps(1.061405429f), one = _mm512_set1_ps(1.0f);
    const __m512 two = _mm512_set1_ps(2.0f), half = _mm512_set1_ps(0.5f);
    const __m512 floor80 = _mm512_set1_ps(-80.0f);
    const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    for (int64_t r = 0; r < rows; r++) {
        float *row = y + r * stride;
        for (int64_t j = 0; j < width; j += 16) {
            __mmask16 k = tail_mask(width - j);
            __m512 x = _mm512_maskz_loadu_ps(k, row + j);
            __m512 z = _mm512_and_ps(_mm512_mul_ps(x, rsqrt2), sign);      /* |x| / sqrt 2 */
            __m512 d = _mm512_fmadd_ps(p, z, one);
            __m512 t = _mm512_rcp14_ps(d);
            t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, two));           /* one Newton step */
            __m512 q = _mm512_fmadd_ps(a5, t, a4);
            q = _mm512_fmadd_ps(q, t, a3);
            q = _mm512_fmadd_ps(q, t, a2);
            q = _mm512_fmadd_ps(q, t, a1);
            q = _mm512_mul_ps(q, t);
            /* 1 - erf(z) = q exp(-z^2), zero below exp(-80) */
            __m512 e = _mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), z), z);
            __mmask16 keep = _mm512_cmp_ps_mask(e, floor80, _CMP_GE_OQ);
            __m512 erfc = _mm512_maskz_mul_ps(keep, q, exp_avx512(_mm512_max_ps(e, floor80)));
            /* x >= 0: 1 + erf = 2 - erfc; x < 0: 1 - erf(|z|) = erfc */
            __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
            __m512 s = _mm512_mask_blend_ps(neg, _mm512_sub_ps(two, erfc), erfc);
            _mm512_mask_storeu_ps(row + j, k, _mm512_mul_ps(_mm512_mul_ps(half, x), s));
        }
    }
    return 0;
}
"""

_extension = _ccompile.OptionalExtension(with_module("gelu_rows_f32", SOURCE), "pytfrt_gelu_")


def address() -> int:
    """The address of ``gelu_rows_f32`` (compiled on first use), or ``0``: no C compiler, no
    AVX-512, or :data:`ENABLED` false."""
    return native_address(_extension) if ENABLED else 0


def geometry(rows: int, width: int, stride: int) -> int | None:
    """The packed ``geometry`` argument for a block of ``rows`` rows of ``width`` floats
    ``stride`` floats apart, or ``None`` when it does not fit."""
    if not (0 <= rows < MAX_DIM and 0 <= width < MAX_DIM and 0 <= stride < 1 << 23):
        return None
    return rows | width << 20 | stride << 40

