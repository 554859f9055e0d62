"""fp4scope.quantize / dequantize / fake_quant against fp4-quant, bit for bit,
for every profile of every format, on hostile tensors (ties, subnormals, +-0,
zero blocks, the largest float, NaN and Inf), as numpy arrays and torch
tensors (float32, bfloat16, float16, strided rows), on the CPU and, where
there is a GPU, on CUDA against the CPU; and the refusals of bad input."""
import os

import h5py
import numpy as np

import fp4scope
from fp4scope import FP4SError
from harness import Skip, cli, devices, expect_error, hostile, run, save_safetensors_bf16, tmp

try:
    import torch
except ImportError:
    torch = None

ROWS, COLS = 144, 256     # 9 tiles of 16 rows; FP8 128x128 tiles with a partial one


def combos():
    for fmt in ("mxfp4", "nvfp4", "fp8"):
        for p in fp4scope.profiles(fmt):
            yield fmt, p


def host(a):
    if torch is not None and isinstance(a, torch.Tensor):
        a = a.detach().cpu()
        if a.dtype == torch.bfloat16:
            return a.view(torch.int16).numpy().view(np.uint16)
        return a.numpy()
    return np.asarray(a)


def same(a, b, what):
    a, b = host(a), host(b)
    assert a.size == b.size, "%s: %d values against %d" % (what, a.size, b.size)
    ab, bb = np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1)
    if ab.tobytes() != bb.tobytes():
        bad = np.nonzero(ab.view(np.uint8 if ab.dtype.itemsize == 1 else (np.uint32 if ab.dtype.itemsize == 4
                                                                         else np.uint16)) !=
                         bb.view(np.uint8 if bb.dtype.itemsize == 1 else (np.uint32 if bb.dtype.itemsize == 4
                                                                         else np.uint16)))[0]
        raise AssertionError("%s: %d of %d values differ, first at %d: %r against %r"
                             % (what, len(bad), ab.size, bad[0], ab[bad[0]], bb[bad[0]]))


def cli_outputs(src, fmt, prof, tag):
    c, s, d, o = (tmp("%s.%s.npy" % (tag, k)) for k in ("c", "s", "d", "o"))
    o = tmp("%s.h5" % tag)
    cli("fp4-quant", "-f", fmt, "-p", prof, "--quiet", "--force", "-o", o, "--codes", c, "--scales", s,
        "--dequant", d, src)
    with h5py.File(o, "r") as f:
        packed = f["codes"][()]
        ts = float(np.asarray(f["tensor_scale"][()]).reshape(-1)[0])
    return np.load(c), np.load(s), np.load(d), packed, ts


def check_against(x, fmt, prof, ref, what):
    codes, scales, deq, packed, ts = ref
    if fp4scope.Spec(fmt, prof)._row_scaled():
        # one tensor scale per row: quantize() refuses it, fake_quant() gives fp4-quant's values
        try:
            fp4scope.quantize(x, fmt, prof)
            raise AssertionError("%s: quantize() took a row-scaled profile" % what)
        except FP4SError as e:
            assert "row-scaled" in str(e), e
        same(fp4scope.fake_quant(x, fmt, prof, dtype="float32"), deq, "%s fake_quant" % what)
        return None
    q = fp4scope.quantize(x, fmt, prof)
    same(q.codes, codes, "%s codes" % what)
    same(q.scales, scales, "%s scales" % what)
    assert q.tensor_scale == ts or (q.tensor_scale != q.tensor_scale and ts != ts), \
        "%s: tensor scale %r, fp4-quant %r" % (what, q.tensor_scale, ts)
    same(fp4scope.dequantize(q), deq, "%s dequantize" % what)
    same(fp4scope.fake_quant(x, fmt, prof, dtype="float32"), deq, "%s fake_quant" % what)
    if fmt != "fp8":
        qp = fp4scope.quantize(x, fmt, prof, packed=True)
        if q.spec.packing == "split" and q.spec.block != 32:
            # fp4-quant -o packs ggml's NVFP4 split per 32 codes (lib/io/qfile.c: fp4s_pack_e2m1),
            # the C API and the CUDA kernels per block of 16 (fp4s_pack_e2m1_block, quant.h):
            # the package follows the C API; checked here against the unpacked codes
            c = host(q.codes).reshape(-1, q.spec.block)
            h = q.spec.block // 2
            packed = (c[:, :h] | (c[:, h:] << 4)).reshape(host(qp.codes).shape)
        same(qp.codes, packed, "%s packed codes" % what)
        same(fp4scope.dequantize(qp), deq, "%s dequantize(packed)" % what)
    return q


def test_every_profile_numpy_and_torch_float32():
    x = hostile(ROWS, COLS, seed=1)
    src = tmp("x.npy")
    np.save(src, x)
    n = 0
    for fmt, prof in combos():
        ref = cli_outputs(src, fmt, prof, "f32")
        check_against(x, fmt, prof, ref, "%s %s numpy" % (fmt, prof))
        if torch is not None:
            t = torch.from_numpy(x.copy())
            check_against(t, fmt, prof, ref, "%s %s torch" % (fmt, prof))
            # rows with a stride: a column slice of a wider tensor, no copy
            wide = torch.zeros(ROWS, COLS + 64)
            wide[:, 32:32 + COLS] = t
            check_against(wide[:, 32:32 + COLS], fmt, prof, ref, "%s %s strided" % (fmt, prof))
        n += 1
    assert n >= 40, "only %d profile/format pairs" % n


def test_every_profile_bfloat16_and_float16():
    if torch is None:
        raise Skip("no torch")
    x = hostile(ROWS, COLS, seed=2)
    tb = torch.from_numpy(x).bfloat16()
    bits = tb.view(torch.int16).numpy().view(np.uint16)
    sb = tmp("xb.safetensors")
    save_safetensors_bf16(sb, "x", bits, (ROWS, COLS))
    with np.errstate(over="ignore"):
        xh = x.astype(np.float16)
    sh = tmp("xh.npy")
    np.save(sh, xh)
    for fmt, prof in combos():
        ref = cli_outputs(sb + ":x", fmt, prof, "bf16")
        check_against(tb, fmt, prof, ref, "%s %s bfloat16" % (fmt, prof))
        # the default output dtype is the input's: float32 values rounded to bfloat16
        fq = fp4scope.fake_quant(tb, fmt, prof)
        assert fq.dtype == torch.bfloat16
        same(fq, torch.from_numpy(ref[2]).bfloat16(), "%s %s fake_quant bfloat16" % (fmt, prof))
        ref = cli_outputs(sh, fmt, prof, "f16")
        check_against(xh, fmt, prof, ref, "%s %s float16 numpy" % (fmt, prof))
        check_against(torch.from_numpy(xh), fmt, prof, ref, "%s %s float16 torch" % (fmt, prof))


def test_rank3_and_out():
    x = hostile(48, 64, seed=3).reshape(4, 12, 64)
    q = fp4scope.quantize(x, "nvfp4", "te")
    assert q.codes.shape == (4, 12, 64) and q.scales.shape == (4, 12, 4)
    flat = fp4scope.quantize(x.reshape(48, 64), "nvfp4", "te")
    same(q.codes, flat.codes, "rank 3 codes")
    out = np.empty((4, 12, 64), np.float32)
    r = fp4scope.fake_quant(x, "nvfp4", "te", out=out)
    assert r is out
    same(out, fp4scope.dequantize(flat), "out=")


def test_cuda_against_cpu():
    if "cuda" not in devices():
        raise Skip("no GPU for the package (torch CUDA and a CUDA build of the library)")
    x = hostile(ROWS, COLS, seed=4)
    t = torch.from_numpy(x)
    ran = 0
    for fmt, prof in combos():
        spec = fp4scope.Spec(fmt, prof)
        if not spec.cuda_supported:
            expect_error(lambda: fp4scope.quantize(t.cuda(), spec), "pass x.cpu()")
            continue
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            xc = t.to(dt)
            xg = xc.cuda()
            for packed in (False, True):
                qc = fp4scope.quantize(xc, spec, packed=packed)
                qg = fp4scope.quantize(xg, spec, packed=packed)
                assert qg.codes.is_cuda and qg.scales.is_cuda
                what = "%s %s %s packed=%s" % (fmt, prof, dt, packed)
                same(qg.codes, qc.codes, what + " codes")
                same(qg.scales, qc.scales, what + " scales")
                assert qg.amax == qc.amax, (what, qg.amax, qc.amax)
                same(fp4scope.dequantize(qg), fp4scope.dequantize(qc), what + " dequantize")
            same(fp4scope.fake_quant(xg, spec), fp4scope.fake_quant(xc, spec), "%s %s %s fake_quant" % (fmt, prof, dt))
            # strided rows on the GPU
            wide = torch.zeros(ROWS, COLS + 32, dtype=dt, device="cuda")
            wide[:, 16:16 + COLS] = xg
            same(fp4scope.fake_quant(wide[:, 16:16 + COLS], spec), fp4scope.fake_quant(xc, spec),
                 "%s %s %s strided fake_quant" % (fmt, prof, dt))
        ran += 1
    assert ran >= 20, ran
    # the tensor's own device and stream
    if torch.cuda.device_count() > 1:
        x1 = t.to("cuda:1")
        assert fp4scope.fake_quant(x1, "nvfp4", "te").device == x1.device
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = fp4scope.fake_quant(t.cuda(), "nvfp4", "te")
    s.synchronize()
    same(y, fp4scope.fake_quant(t, "nvfp4", "te"), "side stream")


def test_bad_input_named():
    x = np.zeros((4, 64), np.float32)
    expect_error(lambda: fp4scope.fake_quant(np.zeros((4, 64)), "nvfp4", "te"), "x: numpy dtype float64",
                 code=-5)
    expect_error(lambda: fp4scope.fake_quant(np.zeros((4, 40), np.float32), "nvfp4", "te"),
                 "x: the last dimension K = 40 is not a multiple of the NVFP4 block (16)", code=-6)
    expect_error(lambda: fp4scope.quantize(np.zeros((4, 48), np.float32), "mxfp4"),
                 "K = 48 is not a multiple of the MXFP4 block (32)", code=-6)
    expect_error(lambda: fp4scope.fake_quant(x, "nvfp4", "nosuch"), "nosuch", code=-1)
    expect_error(lambda: fp4scope.fake_quant(x, "fp5"), "format 'fp5'")
    expect_error(lambda: fp4scope.fake_quant(x, "nvfp4", "te\0x"), "NUL")
    expect_error(lambda: fp4scope.fake_quant(x.T, "nvfp4", "te", name="w"), "w: the last dimension is not "
                 "contiguous", "copies nothing", code=-6)
    expect_error(lambda: fp4scope.fake_quant([[1.0] * 16], "nvfp4"), "a list", code=-5)
    expect_error(lambda: fp4scope.fake_quant(np.float32(1.0), "nvfp4"), "a float32", code=-5)
    expect_error(lambda: fp4scope.fake_quant(x, "nvfp4", "te", out=np.empty((4, 64), np.float64)), "out:",
                 "float32")
    expect_error(lambda: fp4scope.quantize(x, "fp8", "fp8-1x128", packed=True), "FP8")
    if torch is None:
        return
    t = torch.zeros(8, 64)
    expect_error(lambda: fp4scope.fake_quant(t.double(), "nvfp4"), "x: dtype torch.float64", code=-5)
    expect_error(lambda: fp4scope.fake_quant(t.int(), "nvfp4"), "dtype torch.int32", code=-5)
    expect_error(lambda: fp4scope.fake_quant(t.t(), "nvfp4", name="weight"), "weight: the last dimension",
                 code=-6)
    expect_error(lambda: fp4scope.fake_quant(t.view(2, 4, 64).transpose(0, 1), "nvfp4"), "not evenly spaced",
                 code=-6)
    expect_error(lambda: fp4scope.fake_quant(t[:1].expand(8, 64), "nvfp4"), "overlap", code=-6)
    expect_error(lambda: fp4scope.fake_quant(torch.zeros(8, 64, dtype=torch.complex64).conj().imag, "nvfp4"),
                 "lazy negation bit")
    expect_error(lambda: fp4scope.fake_quant(torch.zeros(8, 64, dtype=torch.complex64).real, "nvfp4"),
                 "not contiguous")
    expect_error(lambda: fp4scope.fake_quant(t.to_sparse(), "nvfp4"), "dense", code=-5)
    expect_error(lambda: fp4scope.fake_quant(torch.zeros(8, 64, device="meta"), "nvfp4"), "meta", code=-1)
    expect_error(lambda: fp4scope.fake_quant(t, "nvfp4", out=torch.empty(8, 64, dtype=torch.bfloat16)),
                 "out:", "float32")
    expect_error(lambda: fp4scope.fake_quant(t, "nvfp4", out=torch.empty(8, 32)), "shape (8, 64)")
    if "cuda" in devices():
        g = t.cuda()
        expect_error(lambda: fp4scope.fake_quant(g, "nvfp4", out=torch.empty(8, 64)), "out: on cpu")
        expect_error(lambda: fp4scope.fake_quant(g, "nvfp4", "te-4over6"), "x: on cuda", "pass x.cpu()",
                     code=-10)
        expect_error(lambda: fp4scope.fake_quant(g, "fp8"), "x: on cuda")


def test_empty_and_zero():
    e = np.zeros((0, 32), np.float32)
    assert fp4scope.fake_quant(e, "mxfp4").shape == (0, 32)
    q = fp4scope.quantize(e, "nvfp4", "te")
    assert q.codes.shape == (0, 32) and q.scales.shape == (0, 2)
    z = np.zeros((2, 32), np.float32)
    assert (fp4scope.fake_quant(z, "nvfp4", "te") == 0).all()


def test_profiles_and_version():
    assert "te" in fp4scope.profiles("nvfp4") and "ocp" in fp4scope.profiles("mxfp4")
    assert "ocp" not in fp4scope.profiles("nvfp4")
    here = os.path.dirname(os.path.abspath(__file__))
    vh = open(os.path.join(here, "..", "..", "lib", "include", "fp4scope", "version.h")).read()
    want = vh.split('FP4S_VERSION_STRING "')[1].split('"')[0]
    assert fp4scope.__version__ == want, (fp4scope.__version__, want)
    s = fp4scope.Spec("nvfp4", "te-2d")
    assert s.tile2d and s.block == 16 and s.row_align == 16 and "te" in s.describe()


if __name__ == "__main__":
    run(globals())
