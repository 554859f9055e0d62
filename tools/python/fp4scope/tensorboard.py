"""TensorBoard event files without TensorBoard: scalars written in the
documented event-file format, for where torch.utils.tensorboard cannot be
imported (it needs the tensorboard package, which Debian does not ship).

The format (TensorFlow's TFRecord framing of tensorflow.Event protocol
buffers, as TensorBoard's event_file_loader reads it):
  file  events.out.tfevents.<seconds>.<host>.<pid>.<n> in the log directory
  record  uint64 length (little-endian), uint32 masked CRC-32C of those 8
          bytes, the data, uint32 masked CRC-32C of the data; masked CRC =
          ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2^32), CRC-32C the
          Castagnoli polynomial (reflected 0x82F63B78)
  data  an Event: wall_time (field 1, double), step (2, int64 varint), and
        file_version "brain.Event:2" (3, string) in the first record, a
        Summary (5, message) in the others; a Summary holds Values (1,
        repeated message); a Value a tag (1, string) and simple_value (2,
        float), the scalar form TensorBoard's scalars plugin reads.
tests/python/tfevents_reader.py reads these files back with code of its own
(and TensorBoard's reader where it is installed)."""
import os
import socket
import struct
import time


def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n):
    if n < 0:
        n += 1 << 64  # int64: two's complement, ten bytes
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field_bytes(num, payload):
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _event(wall_time, step=None, file_version=None, summary=None):
    out = _varint(1 << 3 | 1) + struct.pack("<d", wall_time)
    if step is not None:
        out += _varint(2 << 3 | 0) + _varint(int(step))
    if file_version is not None:
        out += _field_bytes(3, file_version.encode())
    if summary is not None:
        out += _field_bytes(5, summary)
    return out


def _scalar_value(tag, value):
    return _field_bytes(1, tag.encode("utf-8")) + _varint(2 << 3 | 5) + struct.pack("<f", float(value))


def record(data):
    """One TFRecord: length, its masked CRC, the data, its masked CRC."""
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", masked_crc(n)) + data + struct.pack("<I", masked_crc(data))


class EventWriter:
    """Scalars into a new event file in logdir (created if missing), as
    torch.utils.tensorboard.SummaryWriter.add_scalar writes them."""
    _count = 0

    def __init__(self, logdir, filename_suffix=""):
        os.makedirs(logdir, exist_ok=True)
        EventWriter._count += 1
        name = "events.out.tfevents.%d.%s.%d.%d%s" % (int(time.time()), socket.gethostname(), os.getpid(),
                                                      EventWriter._count, filename_suffix)
        self.path = os.path.join(logdir, name)
        self._f = open(self.path, "xb")
        self._f.write(record(_event(time.time(), step=0, file_version="brain.Event:2")))
        self._f.flush()

    def add_scalar(self, tag, value, global_step=None, walltime=None):
        summary = _field_bytes(1, _scalar_value(tag, value))
        self._f.write(record(_event(time.time() if walltime is None else walltime,
                                    step=0 if global_step is None else global_step, summary=summary)))

    def add_scalars_at(self, step, values, walltime=None):
        """Several scalars of one step in one event: {tag: value}."""
        summary = b"".join(_field_bytes(1, _scalar_value(t, v)) for t, v in values.items())
        self._f.write(record(_event(time.time() if walltime is None else walltime, step=step, summary=summary)))

    def flush(self):
        if self._f:
            self._f.flush()
            os.fsync(self._f.fileno())

    def close(self):
        if self._f:
            self.flush()
            self._f.close()
            self._f = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def summary_writer(logdir, prefer_torch=True):
    """torch.utils.tensorboard.SummaryWriter(logdir) where it imports (it
    needs the tensorboard package), else an EventWriter."""
    if prefer_torch:
        try:
            from torch.utils.tensorboard import SummaryWriter
            return SummaryWriter(logdir)
        except Exception:
            pass
    return EventWriter(logdir)
