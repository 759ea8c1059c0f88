"""A RAR5 multi-volume writer for one stored member, for fixtures too large
to ship: `rar` is not free software, and no free tool writes RAR. It
writes what rar writes for `rar a -m0 -vSIZE` (rarfile's rar5-vols set is
the model): in every volume the signature, a main header, one file header
for that volume's part of the member and its bytes, and an end header.
Its output is proved by `unar` in integration/test_rar5write.py, not by
the reader it feeds. Python's standard library only.

Volumes are named BASE.partN.rar, N as wide as the volume count needs
(part1..part7, part01..part12); each is at most `volume_size` bytes, the
last what is left.
"""
import os
import zlib

SIGNATURE = b"Rar!\x1a\x07\x01\x00"

# Header types and flags (FORMATS.md, RAR5).
MAIN, FILE, END = 1, 2, 5
HAS_DATA, SPLIT_BEFORE, SPLIT_AFTER = 0x02, 0x08, 0x10
ARCHIVE_VOLUME, ARCHIVE_NUMBERED = 0x01, 0x02
FILE_MTIME, FILE_CRC = 0x02, 0x04
END_MORE_VOLUMES = 0x01
HOST_UNIX = 1

CHUNK = 1 << 20


def vint(n):
    """RAR5's variable-length integer: 7 bits a byte, low first."""
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def block(kind, flags, fields, data_size=None):
    """A header: CRC32 of everything after it, HeaderSize, then the rest."""
    body = vint(kind) + vint(flags | (HAS_DATA if data_size is not None else 0))
    if data_size is not None:
        body += vint(data_size)
    body += fields
    sized = vint(len(body)) + body
    return zlib.crc32(sized).to_bytes(4, "little") + sized


def main_header(number):
    # The first volume carries no number; rar numbers the second 1.
    if number == 0:
        return block(MAIN, 0, vint(ARCHIVE_VOLUME))
    return block(MAIN, 0, vint(ARCHIVE_VOLUME | ARCHIVE_NUMBERED) + vint(number))


def file_header(name, size, mode, mtime, crc, part_size, before, after):
    fields = (vint(FILE_MTIME | FILE_CRC) + vint(size) + vint(mode) + mtime.to_bytes(4, "little")
              + crc.to_bytes(4, "little") + vint(0)  # compression info 0: stored, version 0
              + vint(HOST_UNIX) + vint(len(name)) + name)
    return block(FILE, (SPLIT_BEFORE if before else 0) | (SPLIT_AFTER if after else 0), fields, part_size)


def end_header(more):
    return block(END, 0, vint(END_MORE_VOLUMES if more else 0))


def overhead(number, name, size, part_size):
    """A volume's bytes besides its part's data. The CRC and flags are
    fixed-width or one byte whatever their values, so zeros size them."""
    return (len(SIGNATURE) + len(main_header(number)) + len(end_header(True))
            + len(file_header(name, size, 0o100644, 0, 0, part_size, True, True)))


def plan(name, size, volume_size):
    """Each volume's part size: as much as fits, the last what is left."""
    parts, left = [], size
    while True:
        number = len(parts)
        room = volume_size - overhead(number, name, size, volume_size)
        if room <= 0 and left:
            raise ValueError(f"volume size {volume_size} leaves no room for data")
        part = min(left, room)
        parts.append(part)
        left -= part
        if not left:
            return parts


def volume_names(base, count):
    width = len(str(count))
    return [f"{base}.part{i:0{width}d}.rar" for i in range(1, count + 1)]


def write_rar5_volumes(src_path, member_name, out_dir, base, volume_size, mtime=None):
    """Writes `src_path` as the stored member `member_name` (a path with
    "/") of a RAR5 volume set BASE.partN.rar in `out_dir`; returns the
    volumes' paths in order."""
    name = member_name.encode()
    st = os.stat(src_path)
    size = st.st_size
    mtime = int(st.st_mtime if mtime is None else mtime)
    mode = st.st_mode & 0o7777 | 0o100000
    parts = plan(name, size, volume_size)
    paths = [os.path.join(out_dir, n) for n in volume_names(base, len(parts))]
    whole = 0
    with open(src_path, "rb") as src:
        for number, (path, part_size) in enumerate(zip(paths, parts)):
            last = number == len(parts) - 1
            with open(path + ".tmp", "wb") as out:
                out.write(SIGNATURE + main_header(number))
                at = out.tell()
                header_size = len(file_header(name, size, mode, mtime, 0, part_size, True, True))
                out.write(bytes(header_size))
                crc, left = 0, part_size
                while left:
                    chunk = src.read(min(CHUNK, left))
                    if not chunk:
                        raise ValueError(f"{src_path} shrank while written")
                    crc, whole = zlib.crc32(chunk, crc), zlib.crc32(chunk, whole)
                    out.write(chunk)
                    left -= len(chunk)
                out.write(end_header(more=not last))
                # A part's header holds its data's CRC32, the last part's
                # the whole member's (as rar writes them): known only now.
                header = file_header(name, size, mode, mtime, whole if last else crc, part_size,
                                     before=number > 0, after=not last)
                assert len(header) == header_size
                out.seek(at)
                out.write(header)
            os.rename(path + ".tmp", path)
    return paths
