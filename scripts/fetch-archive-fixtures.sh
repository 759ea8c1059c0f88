#!/bin/sh
# Fetches the archive fixtures the Archives tests read, none written here:
# rarfile 4.5's own test archives from its PyPI sdist, each member as
# unar (a third-party reader) extracts it, and ZIP files made by Python's
# zipfile (stored; forced ZIP64; a prepended stub; data descriptors).
# Usage: scripts/fetch-archive-fixtures.sh [DIR]   (default ~/.cache/mediafs-archive-fixtures)
# Then: export MEDIAFS_RARFILE_FIXTURES=DIR
set -eu
dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/mediafs-archive-fixtures}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
command -v unar >/dev/null || { echo "needs unar (apt-get install unar)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "needs python3" >&2; exit 1; }

if [ ! -f "$dir/rar/rar3-solid.rar" ]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    python3 -m pip download --quiet --no-deps --no-binary :all: rarfile==4.5 -d "$work"
    tar -xzf "$work/rarfile-4.5.tar.gz" -C "$work"
    mkdir -p "$dir/rar"
    for name in rar5-vols.part1.rar rar5-vols.part2.rar rar5-vols.part3.rar \
                rar3-vols.part1.rar rar3-vols.part2.rar rar3-vols.part3.rar \
                rar3-old.rar rar3-old.r00 rar3-old.r01 rar5-solid.rar rar5-hpsw.rar \
                rar5-evil-symlink-traversal.rar rar5-dups.rar rar5-psw.rar rar5-hlink.rar \
                rar5-subdirs.rar rar5-crc.sfx rar3-seektest.sfx rar3-symlink-unix.rar rar3-subdirs.rar \
                rar3-solid.rar; do
        cp "$work/rarfile-4.5/test/files/$name" "$dir/rar/"
    done
fi

# What unar extracts from each set, given its first volume. unar does not
# recognise the self-extractors: it is given the archive after the stub.
extract() {
    out="$dir/extracted/$1"
    [ -d "$out" ] && return
    mkdir -p "$out"
    unar -quiet -no-directory -output-directory "$out" "$2" >/dev/null
}
for first in rar5-vols.part1.rar rar3-vols.part1.rar rar3-old.rar rar3-symlink-unix.rar; do
    extract "$first" "$dir/rar/$first"
done
tail -c +128001 "$dir/rar/rar5-crc.sfx" > "$dir/rar5-crc.sfx.rar"
tail -c +728001 "$dir/rar/rar3-seektest.sfx" > "$dir/rar3-seektest.sfx.rar"
extract rar5-crc.sfx "$dir/rar5-crc.sfx.rar"
extract rar3-seektest.sfx "$dir/rar3-seektest.sfx.rar"
rm -f "$dir/rar5-crc.sfx.rar" "$dir/rar3-seektest.sfx.rar"

mkdir -p "$dir/zip"
python3 - "$dir/zip" <<'PY'
import io, os, sys, zipfile
out = sys.argv[1]
members = {"film/a.bin": bytes(range(256)) * 40, "café.txt": "a name in UTF-8\n".encode(), "empty": b""}
def write(zf, force_zip64=False):
    for name, data in members.items():
        info = zipfile.ZipInfo(name, date_time=(2020, 5, 17, 12, 30, 44))
        with zf.open(info, "w", force_zip64=force_zip64) as f:
            f.write(data)
with zipfile.ZipFile(os.path.join(out, "stored.zip"), "w", zipfile.ZIP_STORED) as zf:
    write(zf)
with open(os.path.join(out, "stub.zip"), "wb") as f:
    f.write(b"#!/bin/sh\necho a self-extractor stub\nexit 0\n" + b"\0" * 1000)
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
        write(zf)
# Every central field saturated and a ZIP64 end record: the limits made small.
zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = 1, 1
with zipfile.ZipFile(os.path.join(out, "zip64.zip"), "w", zipfile.ZIP_STORED) as zf:
    write(zf, force_zip64=True)
zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = (1 << 31) - 1, (1 << 16) - 1
class Unseekable(io.RawIOBase):
    def __init__(self, f): self.f = f
    def writable(self): return True
    def write(self, b): return self.f.write(b)
    def seekable(self): return False
with open(os.path.join(out, "descriptor.zip"), "wb") as f:
    with zipfile.ZipFile(Unseekable(f), "w", zipfile.ZIP_STORED) as zf:
        write(zf)
for name, data in members.items():
    path = os.path.join(out, "expected", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").write(data)
PY
echo "export MEDIAFS_RARFILE_FIXTURES=$dir"
