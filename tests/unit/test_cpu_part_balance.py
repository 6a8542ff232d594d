"""Two-part convolution splits that follow the threads' speeds (``_part_balance``): every
split variant of a batch-1 row split computes the convolution (against PyTorch, odd sizes,
each residual mode), the estimate and the table a job runs next follow known part end times
(the ``stamp`` function called from two threads), and a part's own activation still runs."""

from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
import pytest
from cpu_refs import conv_in_mode, conv_relu_nhwc

from pytfrt.backends.cpu import _dnnl_conv, _parallel, _part_balance, _silu, _spin_pool, conv

needs_stamp = pytest.mark.skipif(not _part_balance.stamp_address(),
                                 reason="needs a C compiler")
needs_dnnl = pytest.mark.skipif(
    not _dnnl_conv.available() or _parallel.num_threads() < 2 or not _part_balance.stamp_address(),
    reason="needs oneDNN, two threads and a C compiler")

_STAMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.c_int64)


@pytest.fixture(autouse=True)
def small_convs_too(monkeypatch):
    """The tests' convolutions are small: variants for them too (see the last test)."""
    monkeypatch.setattr(_part_balance, "MIN_MACS", 0)


@pytest.fixture
def gain(monkeypatch):
    """``gain(g, deadband=0)`` sets the estimate's gain and dead band (no dead band: every
    variant can be chosen by setting the estimate to its share); the process's estimate and
    settings are restored after the test."""
    before = _part_balance.share()

    def set_gain(g: float, deadband: float = 0.0) -> None:
        monkeypatch.setattr(_part_balance, "GAIN", g)
        monkeypatch.setattr(_part_balance, "DEADBAND", deadband)

    yield set_gain
    monkeypatch.undo()
    _part_balance.set_share(before)


def _tables(n: int) -> list[tuple[float, np.ndarray]]:
    shares = _part_balance.SHARES[:n]
    out = []
    for k, share in enumerate(shares):
        t = np.zeros((2, _spin_pool.NF), np.int64)
        t[:, _spin_pool.PRIM] = [100 + 2 * k, 101 + 2 * k]  # tells the variants apart
        out.append((share, t))
    return out


def _stamp_parts(table: np.ndarray, first: int, gap_s: float, same_thread: bool) -> None:
    """Call ``stamp`` for the two parts of ``table``: part ``first`` ends, then ``gap_s``
    later the other one (on another thread unless ``same_thread``)."""
    stamp = _STAMP(_part_balance.stamp_address())

    def end(i: int) -> None:
        assert stamp(0, int(table[i, _spin_pool.ACT_N])) == 0

    end(first)
    time.sleep(gap_s)
    if same_thread:
        end(1 - first)
    else:
        t = threading.Thread(target=end, args=(1 - first,))
        t.start()
        t.join()


@needs_stamp
def test_the_estimate_and_the_next_table_follow_the_part_ends(gain):
    gain(1.0)  # the estimate jumps to what a job measured: known answers
    _part_balance.set_share(0.5)
    variants = _tables(5)
    live = np.zeros((2, _spin_pool.NF), np.int64)
    cycles_per_ms = 1e3 * _spin_pool.cycles_per_us()
    # A nominal 400 ms job and gaps of 120-450 ms: each case's answer holds for any extra delay
    # of the second part's thread of up to ~180 ms (a loaded machine), not just for the sleep.
    keep = _part_balance.job_context(live, variants, 2, 400 * cycles_per_ms, _spin_pool.ACT_FN,
                                     _spin_pool.ACT_N)
    job = keep[0]
    # ends further apart than the whole job's nominal 400 ms: a preemption, not a speed
    _stamp_parts(variants[2][1], 0, 0.45, same_thread=False)
    assert _part_balance.share() == 0.5 and job[_part_balance.J_CUR] == 2
    assert np.array_equal(live, variants[2][1]) and job[_part_balance.J_CUR] == 2
    # the helper's part (index 1) ends 120-400 ms after the caller's of a job nominally 400 ms
    # on one thread: the caller could take 0.5 + 120 / 800 or more -- clamped to the largest
    # share
    _stamp_parts(variants[2][1], 0, 0.12, same_thread=False)
    assert _part_balance.share() == pytest.approx(0.625)
    assert job[_part_balance.J_CUR] == 4 and np.array_equal(live, variants[4][1])
    # now the caller's part ends 220-400 ms late: 0.625 - 220 / 800 or less, the smallest share
    _stamp_parts(variants[4][1], 1, 0.22, same_thread=False)
    assert _part_balance.share() == pytest.approx(0.375)
    assert job[_part_balance.J_CUR] == 0 and np.array_equal(live, variants[0][1])
    # both parts on one thread (the helper was asleep): the estimate stays, but the table
    # follows an estimate set meanwhile
    _part_balance.set_share(0.56)
    _stamp_parts(variants[0][1], 0, 0.002, same_thread=True)
    assert _part_balance.share() == pytest.approx(0.56)
    assert job[_part_balance.J_CUR] == 3 and np.array_equal(live, variants[3][1])
    # within the dead band around 0.5 the even split runs
    gain(1.0, deadband=0.07)
    _part_balance.set_share(0.56)
    _stamp_parts(variants[3][1], 0, 0.002, same_thread=True)
    assert job[_part_balance.J_CUR] == 2 and np.array_equal(live, variants[2][1])


@needs_stamp
def test_a_small_difference_moves_the_estimate_by_the_gain(gain):
    gain(0.5)
    _part_balance.set_share(0.5)
    variants = _tables(5)
    live = np.zeros((2, _spin_pool.NF), np.int64)
    cycles_per_ms = 1e3 * _spin_pool.cycles_per_us()
    keep = _part_balance.job_context(live, variants, 2, 1000 * cycles_per_ms,
                                     _spin_pool.ACT_FN, _spin_pool.ACT_N)
    _stamp_parts(variants[2][1], 0, 0.02, same_thread=False)  # >= 20 ms of a 1 s job
    s = _part_balance.share()
    assert 0.5 + 0.5 * 0.01 <= s < 0.5 + 0.5 * 0.1  # want 0.5 + d / 2 s: 0.01 for 20 ms
    assert keep[0][_part_balance.J_CUR] == 2  # still closest to the even split


@needs_stamp
def test_a_parts_own_activation_runs_before_the_stamp(gain):
    fn = _silu.address()
    if not fn:
        pytest.skip("no SiLU function")
    rng = np.random.default_rng(3)
    y = rng.standard_normal(1000).astype(np.float32) * 4
    expect = y / (1 + np.exp(-y.astype(np.float64)))
    variants = _tables(2)
    for _, t in variants:
        t[:, _spin_pool.ACT_FN] = fn
        t[:, _spin_pool.ACT_N] = [600, 400]
    live = np.zeros((2, _spin_pool.NF), np.int64)
    keep = _part_balance.job_context(live, variants, 0, 1e9, _spin_pool.ACT_FN,
                                     _spin_pool.ACT_N)
    assert keep and (live[:, _spin_pool.ACT_FN] == _part_balance.stamp_address()).all()
    stamp = _STAMP(_part_balance.stamp_address())
    assert stamp(y.ctypes.data, int(live[0, _spin_pool.ACT_N])) == 0
    assert stamp(y.ctypes.data + 4 * 600, int(live[1, _spin_pool.ACT_N])) == 0
    np.testing.assert_allclose(y, expect, rtol=1e-5, atol=1e-30)


@needs_dnnl
@pytest.mark.parametrize("h,w,k,stride,cin,cout", [
    (23, 17, 3, 1, 24, 40), (30, 30, 3, 2, 16, 32), (19, 11, 1, 1, 64, 48)])
@pytest.mark.parametrize("residual", ["none", "operand", "in place"])
def test_every_row_split_variant_computes_the_convolution(monkeypatch, gain, h, w, k, stride,
                                                          cin, cout, residual):
    gain(0.0)  # the estimate stays where the test sets it: the variant is the test's choice
    monkeypatch.setattr(_dnnl_conv, "SPIN_POOL", True)
    rng = np.random.default_rng(h * w + k)
    wt = (rng.standard_normal((k, k, cin, cout)) * 0.1).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    pad = k // 2
    plan = conv.plan_conv2d(wt, layout="NHWC", strides=(stride, stride), pads=(pad,) * 4,
                            bias=b, activation="relu", algorithm="dnnl")
    x = rng.standard_normal((1, h, w, cin)).astype(np.float32)
    oh = (h + 2 * pad - k) // stride + 1
    r = rng.standard_normal((1, oh, (w + 2 * pad - k) // stride + 1, cout)).astype(np.float32)
    mode = {"none": _dnnl_conv.NO_RESIDUAL, "operand": _dnnl_conv.RESIDUAL_OPERAND,
            "in place": _dnnl_conv.RESIDUAL_IN_DST}[residual]
    prims = plan.dnnl._get(x.shape, mode)
    assert prims is not None and len(prims) == 2 and prims[0].variants
    shares = [s for s, _ in prims[0].variants]
    assert shares == sorted(shares) and len(shares) >= 4 and shares[0] < 0.45 < 0.55 < shares[-1]
    # each variant's first part has its share of the output rows, the two all of them
    total = sum(p.pixels for p in prims)
    for share, parts in prims[0].variants:
        assert parts[0].pixels + parts[1].pixels == total
        assert parts[0].pixels == pytest.approx(share * total)

    def call() -> np.ndarray:
        return conv_in_mode(plan, x, r, residual)

    _each_variant(plan.dnnl, (x.shape, mode), call,
                  conv_relu_nhwc(x, wt, b, stride, pad, None if residual == "none" else r))


def _each_variant(dnnl, key, call, expect) -> None:
    """Set the estimate to each variant's share, then check that the next call runs that
    variant and computes ``expect``."""
    variants = dnnl._get(*key)[0].variants
    for k_var, (share, _) in enumerate(variants):
        _part_balance.set_share(share)
        call()  # the run that ends on this estimate picks the variant for the next one
        context = dnnl._jobs[key].keep[1][0]
        assert context[_part_balance.J_CUR] == k_var
        np.testing.assert_allclose(call(), expect, rtol=1e-4, atol=1e-4)


def _filter_copies(dnnl) -> int:
    """Prepared filters that are not views of another (each a copy of filter elements)."""
    return sum(not isinstance(h.keep, _dnnl_conv._Prim) for h in dnnl._weights)


@needs_dnnl
@pytest.mark.parametrize("in_place", [False, True])
def test_channel_split_variants_share_one_prepared_filter(monkeypatch, gain, in_place):
    """A 7x7 image's 3x3 convolution (split by output channels through per-thread buffers):
    every variant against PyTorch, one prepared copy of the filter for all of them, the
    user's filter read back exactly from the views."""
    gain(0.0)
    monkeypatch.setattr(_dnnl_conv, "SPIN_POOL", True)
    rng = np.random.default_rng(11)
    cin, cout = 128, 256
    wt = (rng.standard_normal((3, 3, cin, cout)) * 0.05).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    plan = conv.plan_conv2d(wt, layout="NHWC", pads=(1,) * 4, bias=b, activation="relu",
                            algorithm="dnnl")
    x = rng.standard_normal((1, 7, 7, cin)).astype(np.float32)
    r = rng.standard_normal((1, 7, 7, cout)).astype(np.float32)
    mode = _dnnl_conv.RESIDUAL_IN_DST if in_place else _dnnl_conv.NO_RESIDUAL
    prims = plan.dnnl._get(x.shape, mode)
    assert prims[0].channels is not None and prims[0].variants
    bounds = [parts[0].channels[1] for _, parts in prims[0].variants]
    # 96-160 channels for the caller; a bound inside one of the prepared filter's blocks of
    # output channels (oneDNN's NHWC kernel blocks them by 32 here) has no view: left out
    assert bounds == sorted(bounds) and {96, 128, 160} <= set(bounds) <= set(range(96, 161, 16))
    assert _filter_copies(plan.dnnl) == 1

    def call() -> np.ndarray:
        return conv_in_mode(plan, x, r, "in place" if in_place else "none")

    _each_variant(plan.dnnl, (x.shape, mode), call,
                  conv_relu_nhwc(x, wt, b, 1, 1, r if in_place else None))
    assert np.array_equal(plan.filter(), wt)


@needs_dnnl
@pytest.mark.parametrize("blocked, kh, cin, cout", [(False, 3, 128, 256), (False, 1, 64, 96),
                                                    (True, 1, 64, 256)])
def test_the_submemory_test_of_a_view_agrees_with_reordering(blocked, kh, cin, cout):
    """Whether output channels [c0, c1) of the prepared whole filter can be a view is decided
    from oneDNN's memory descriptors: wherever they say yes, reordering those channels of the
    user's filter into the part's format (the byte probe) must give exactly the bytes there;
    and they must say yes for some bounds (the splits of ResNet-50 all take that path)."""
    from pytfrt.backends.cpu import _dnnl_blocked as bl

    rng = np.random.default_rng(13)
    wt = (rng.standard_normal((kh, kh, cin, cout)) * 0.05).astype(np.float32)
    pads = (kh // 2,) * 4
    if blocked:
        dnnl = bl.BlockedConv(wt, None, strides=(1, 1), dilations=(1, 1), pads=pads, groups=1,
                              activation="relu", alpha=0.0).dnnl
        shape, layout = (1, cin // 16, 14, 14, 16), _dnnl_conv.BLOCKED
    else:
        dnnl = conv.plan_conv2d(wt, layout="NHWC", pads=pads, algorithm="dnnl").dnnl
        shape, layout = (1, 14, 14, cin), "NHWC"
    lib, none = dnnl._lib, _dnnl_conv.NO_RESIDUAL
    temp = _dnnl_conv._Prim(lib)
    try:
        dnnl._create(temp, dnnl._channel_parts(shape, [0, cout])[0], none)
        whole = next(h for h in dnnl._weights if h.channels == (0, cout))
        total = int(lib.fn["dnnl_memory_desc_get_size"](whole.src_md))
        dims, strides = _dnnl_conv._weights_md_dims(layout, kh, kh, cin, cout, 1)
        said_yes = 0
        for c0 in range(0, cout, 16):
            for c1 in range(c0 + 16, cout + 1 - (c0 == 0) * 16, 16):
                part = _dnnl_conv._Prim(lib)
                try:
                    dnnl._create(part, dnnl._channel_parts(shape, [c0, c1])[0], none)
                    w_md = lib.fn["dnnl_primitive_desc_query_md"](
                        part.pd, _dnnl_conv._Q_WEIGHTS_MD, 0)
                    size = int(lib.fn["dnnl_memory_desc_get_size"](w_md))
                    if size != total // cout * (c1 - c0) or not _dnnl_conv._channels_are_submemory(
                            lib, whole.src_md, w_md, (c0, c1), total // cout):
                        continue
                    said_yes += 1
                    user_md = part.own("dnnl_memory_desc_destroy",
                                       lib.strided_md((c1 - c0, *dims[1:]), strides))
                    addr = _dnnl_conv._data_handle(lib, whole.weights) + total // cout * c0
                    assert dnnl._reorders_to(user_md, w_md, c0, addr, size), (c0, c1)
                finally:
                    part.destroy()
        assert said_yes > 0
    finally:
        temp.destroy()


@needs_dnnl
def test_blocked_channel_split_variants(gain):
    """``nChw16c`` channel parts written in place: every variant against PyTorch."""
    from pytfrt.backends.cpu import _dnnl_blocked as bl

    gain(0.0)
    rng = np.random.default_rng(12)
    cin, cout = 64, 256
    wt = (rng.standard_normal((1, 1, cin, cout)) * 0.05).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    bc = bl.BlockedConv(wt, b, strides=(1, 1), dilations=(1, 1), pads=(0,) * 4, groups=1,
                        activation="relu", alpha=0.0)
    x = rng.standard_normal((1, 14, 14, cin)).astype(np.float32)
    xb = np.ascontiguousarray(x.reshape(1, 14, 14, cin // 16, 16).transpose(0, 3, 1, 2, 4))
    ref = conv_relu_nhwc(x, wt, b, 1, 0, None)
    expect = np.ascontiguousarray(ref.reshape(1, 14, 14, cout // 16, 16).transpose(0, 3, 1, 2, 4))
    run = bc.runner()
    out = np.empty(bc.output_shape(xb.shape), np.float32)
    run(xb, None, out)
    prims = bc.dnnl._get(xb.shape, _dnnl_conv.NO_RESIDUAL)
    assert prims[0].variants and _filter_copies(bc.dnnl) == 1
    _each_variant(bc.dnnl, (xb.shape, _dnnl_conv.NO_RESIDUAL), lambda: run(xb, None, out),
                  expect)
    assert np.array_equal(bc.filter(), wt)


def test_batch_bounds_put_the_middle_images_in_parts_of_their_own(monkeypatch):
    assert _dnnl_conv.batch_bounds(8, 2) == [0, 3, 4, 5, 8]
    assert _dnnl_conv.batch_bounds(5, 2) == [0, 1, 2, 3, 5]
    assert _dnnl_conv.batch_bounds(4, 2) == [0, 1, 2, 3, 4]
    assert _dnnl_conv.batch_bounds(3, 2) == [0, 1, 3]
    assert _dnnl_conv.batch_bounds(8, 4) == [0, 2, 4, 6, 8]
    monkeypatch.setattr(_dnnl_conv, "BATCH_MIDDLE_IMAGES", False)
    assert _dnnl_conv.batch_bounds(8, 2) == [0, 4, 8]


@needs_dnnl
@pytest.mark.parametrize("n", [4, 5, 8])
@pytest.mark.parametrize("residual", ["none", "in place"])
def test_batches_with_middle_image_parts_match_torch(monkeypatch, n, residual):
    monkeypatch.setattr(_dnnl_conv, "SPIN_POOL", True)
    rng = np.random.default_rng(n + 40)
    wt = (rng.standard_normal((3, 3, 16, 24)) * 0.1).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    plan = conv.plan_conv2d(wt, layout="NHWC", pads=(1,) * 4, bias=b, activation="relu",
                            algorithm="dnnl")
    x = rng.standard_normal((n, 9, 10, 16)).astype(np.float32)
    r = rng.standard_normal((n, 9, 10, 24)).astype(np.float32)
    mode = _dnnl_conv.RESIDUAL_IN_DST if residual == "in place" else _dnnl_conv.NO_RESIDUAL
    prims = plan.dnnl._get(x.shape, mode)
    assert [p.src_dims[0] for p in prims] == list(np.diff(_dnnl_conv.batch_bounds(n, 2)))
    for _ in range(2):
        out = r.copy()
        got = conv.conv2d(plan, x, out, out=out) if mode else conv.conv2d(plan, x)
        np.testing.assert_allclose(got, conv_relu_nhwc(x, wt, b, 1, 1, r if mode else None),
                                   rtol=1e-4, atol=1e-4)


@needs_dnnl
@pytest.mark.parametrize("n", [3])
def test_batch_split_variants(monkeypatch, gain, n):
    gain(0.0)
    monkeypatch.setattr(_dnnl_conv, "SPIN_POOL", True)
    rng = np.random.default_rng(n)
    wt = (rng.standard_normal((3, 3, 32, 48)) * 0.1).astype(np.float32)
    b = rng.standard_normal(48).astype(np.float32)
    plan = conv.plan_conv2d(wt, layout="NHWC", pads=(1,) * 4, bias=b, activation="relu",
                            algorithm="dnnl")
    x = rng.standard_normal((n, 13, 11, 32)).astype(np.float32)
    prims = plan.dnnl._get(x.shape, _dnnl_conv.NO_RESIDUAL)
    firsts = [parts[0].src_dims[0] for _, parts in prims[0].variants]
    assert firsts == [1, 2]
    _each_variant(plan.dnnl, (x.shape, _dnnl_conv.NO_RESIDUAL), lambda: conv.conv2d(plan, x),
                  conv_relu_nhwc(x, wt, b, 1, 1, None))


@needs_dnnl
@pytest.mark.parametrize("enabled,min_macs,expect", [
    (False, 0, False), (True, 10_000_000, False), (True, 7_372_800, True)])
def test_no_variants_when_switched_off_or_small(monkeypatch, enabled, min_macs, expect):
    monkeypatch.setattr(_part_balance, "ENABLED", enabled)
    monkeypatch.setattr(_part_balance, "MIN_MACS", min_macs)
    rng = np.random.default_rng(5)
    wt = (rng.standard_normal((3, 3, 16, 32)) * 0.1).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    plan = conv.plan_conv2d(wt, layout="NHWC", pads=(1,) * 4, bias=b, activation="relu",
                            algorithm="dnnl")
    prims = plan.dnnl._get((1, 40, 40, 16), _dnnl_conv.NO_RESIDUAL)  # 40 * 40 * 32 * 144 MACs
    assert prims is not None and len(prims) == 2 and bool(prims[0].variants) == expect
    if expect:  # switched off after the variants were made: the job is the even split's
        monkeypatch.setattr(_part_balance, "ENABLED", False)
        x = rng.standard_normal((1, 40, 40, 16)).astype(np.float32)
        np.testing.assert_allclose(conv.conv2d(plan, x), conv_relu_nhwc(x, wt, b, 1, 1, None),
                                   rtol=1e-4, atol=1e-4)
        job = plan.dnnl._jobs[((1, 40, 40, 16), _dnnl_conv.NO_RESIDUAL)]
        assert job.keep is None
