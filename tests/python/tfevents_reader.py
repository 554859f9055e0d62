"""A reader of TensorBoard event files that shares no code with
fp4scope.tensorboard (the writer it checks): TFRecord framing with both
CRC-32C checks, and a generic protocol-buffer decoder of the tensorflow.Event
messages. read_scalars(path) -> [(step, tag, value, wall_time)];
tensorboard_scalars(logdir) reads through TensorBoard's own loader when the
tensorboard package is installed (None when it is not).

    python3 tfevents_reader.py FILE...    prints step tag value per scalar"""
import struct
import sys


def crc32c_bitwise(data):
    """CRC-32C (Castagnoli), one bit at a time with the normal-form polynomial
    0x1EDC6F41 on reflected bytes (the writer uses a table of the reflected
    form)."""
    crc = 0xFFFFFFFF
    for byte in data:
        rb = int("{:08b}".format(byte)[::-1], 2)
        for i in range(7, -1, -1):
            bit = (rb >> i) & 1
            top = (crc >> 31) & 1
            crc = (crc << 1) & 0xFFFFFFFF
            if top ^ bit:
                crc ^= 0x1EDC6F41
    # crc above is of the unreflected form on reflected input: reflect it
    return int("{:032b}".format(crc)[::-1], 2) ^ 0xFFFFFFFF


def unmask(masked):
    rot = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rot << 15) | (rot >> 17)) & 0xFFFFFFFF


class FormatError(Exception):
    pass


def records(blob):
    pos = 0
    while pos < len(blob):
        if len(blob) - pos < 12:
            raise FormatError("truncated record header at byte %d" % pos)
        head = blob[pos:pos + 8]
        (length,) = struct.unpack("<Q", head)
        (hcrc,) = struct.unpack("<I", blob[pos + 8:pos + 12])
        if unmask(hcrc) != crc32c_bitwise(head):
            raise FormatError("length CRC mismatch at byte %d" % pos)
        start = pos + 12
        if len(blob) - start < length + 4:
            raise FormatError("truncated record at byte %d" % pos)
        data = blob[start:start + length]
        (dcrc,) = struct.unpack("<I", blob[start + length:start + length + 4])
        if unmask(dcrc) != crc32c_bitwise(data):
            raise FormatError("data CRC mismatch at byte %d" % pos)
        yield data
        pos = start + length + 4


def fields(msg):
    """Generic protobuf decode: [(field number, wire type, value)]; value is
    an int (varint), bytes (length-delimited) or the raw 4/8 bytes."""
    out = []
    pos = 0
    while pos < len(msg):
        key, pos = varint(msg, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            val, pos = varint(msg, pos)
        elif wt == 1:
            val, pos = msg[pos:pos + 8], pos + 8
        elif wt == 2:
            n, pos = varint(msg, pos)
            val, pos = msg[pos:pos + n], pos + n
        elif wt == 5:
            val, pos = msg[pos:pos + 4], pos + 4
        else:
            raise FormatError("wire type %d" % wt)
        if pos > len(msg):
            raise FormatError("message runs past its end")
        out.append((num, wt, val))
    return out


def varint(b, pos):
    shift = result = 0
    while True:
        if pos >= len(b):
            raise FormatError("truncated varint")
        c = b[pos]
        pos += 1
        result |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return result, pos


def read_scalars(path):
    """[(step, tag, value, wall_time)] of every simple_value in the file;
    checks that the first event is the file version."""
    with open(path, "rb") as f:
        blob = f.read()
    out = []
    first = True
    for data in records(blob):
        ev = fields(data)
        wall = [struct.unpack("<d", v)[0] for n, w, v in ev if n == 1 and w == 1]
        step = [v for n, w, v in ev if n == 2 and w == 0]
        step = step[0] if step else 0
        if step >= 1 << 63:
            step -= 1 << 64
        if first:
            ver = [v for n, w, v in ev if n == 3 and w == 2]
            if ver != [b"brain.Event:2"]:
                raise FormatError("%s: the first event is not the file version (%r)" % (path, ver))
            first = False
            continue
        for n, w, summary in ev:
            if n != 5 or w != 2:
                continue
            for vn, vw, value in fields(summary):
                if vn != 1 or vw != 2:
                    continue
                vf = fields(value)
                tag = [v for a, b, v in vf if a == 1 and b == 2]
                sv = [struct.unpack("<f", v)[0] for a, b, v in vf if a == 2 and b == 5]
                if tag and sv:
                    out.append((step, tag[0].decode("utf-8"), sv[0], wall[0] if wall else None))
    return out


def tensorboard_scalars(logdir):
    """{tag: [(step, value)]} through TensorBoard's EventAccumulator, or None
    when the tensorboard package is not installed."""
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        return None
    acc = EventAccumulator(logdir, size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


if __name__ == "__main__":
    for p in sys.argv[1:]:
        for step, tag, value, _ in read_scalars(p):
            print(step, tag, value)
