"""fp4scope.tensorboard's event files read back by tfevents_reader (code of
its own: bitwise CRC-32C, a generic protobuf decoder) and, where installed,
by TensorBoard's own loader; a damaged file is detected by the reader."""
import math
import os
import struct

import numpy as np

from fp4scope.tensorboard import EventWriter
from harness import TMP, run
from tfevents_reader import FormatError, crc32c_bitwise, read_scalars, tensorboard_scalars


def test_known_crc():
    # the CRC-32C check value of "123456789" (RFC 3720, appendix B.4)
    assert crc32c_bitwise(b"123456789") == 0xE3069283


def test_scalars_round_trip():
    d = os.path.join(TMP, "tb1")
    rng = np.random.default_rng(0)
    want = []
    with EventWriter(d) as w:
        for step in [0, 1, 2, 10, 2 ** 31 + 5, 2 ** 53]:
            for tag in ("fp4/all/relative_error", "fp4/layers.0.mlp.experts.3.down_proj/ratio_scale",
                        "mismatch/rollout_corr/k3_kl", "ünïcode/τ"):
                v = float(np.float32(rng.standard_normal() * 10.0 ** int(rng.integers(-30, 30))))
                w.add_scalar(tag, v, step)
                want.append((step, tag, v))
        w.add_scalar("edge/nan", float("nan"), 3)
        w.add_scalar("edge/inf", float("inf"), 3)
        w.add_scalar("edge/neg_step", 1.5, -7)
        w.add_scalars_at(99, {"a": 1.0, "b": -2.0})
        path = w.path
    assert os.path.basename(path).startswith("events.out.tfevents.")
    got = read_scalars(path)
    assert [(s, t, v) for s, t, v, _ in got[:len(want)]] == want
    rest = {t: (s, v) for s, t, v, _ in got[len(want):]}
    assert math.isnan(rest["edge/nan"][1]) and rest["edge/inf"][1] == math.inf
    assert rest["edge/neg_step"] == (-7, 1.5) and rest["a"] == (99, 1.0) and rest["b"] == (99, -2.0)
    tb = tensorboard_scalars(d)
    if tb is not None:      # TensorBoard's own reader, where the package is installed
        assert tb["fp4/all/relative_error"][0] == (0, want[0][2])


def test_damage_detected():
    d = os.path.join(TMP, "tb2")
    with EventWriter(d) as w:
        w.add_scalar("x", 1.0, 1)
        path = w.path
    blob = bytearray(open(path, "rb").read())
    for pos in (3, 10, len(blob) - 6):
        bad = bytearray(blob)
        bad[pos] ^= 0x40
        p = path + ".bad%d" % pos
        open(p, "wb").write(bytes(bad))
        try:
            read_scalars(p)
            raise AssertionError("a flipped byte at %d went unnoticed" % pos)
        except FormatError:
            pass
    open(path + ".cut", "wb").write(bytes(blob[:-3]))
    try:
        read_scalars(path + ".cut")
        raise AssertionError("a truncated file went unnoticed")
    except FormatError:
        pass
    # the framing as documented: the first record's length and its masked CRC
    (n,) = struct.unpack("<Q", bytes(blob[:8]))
    assert 8 + 4 + n + 4 <= len(blob)


if __name__ == "__main__":
    run(globals())
