#!/usr/bin/env bash
# The one place that says which files an installed mediafs is and where they
# go: `make install` (PREFIX=/usr/local) and `make deb` (/usr) both call it.
#
#   scripts/install-files.sh BINARY DESTDIR PREFIX UNITDIR
#
#   $PREFIX/bin/mediafs                    the binary, stripped (Debian policy 10.1)
#   $PREFIX/share/man/man1/mediafs.1.gz    the manual page
#   $UNITDIR/mediafs@.service              the systemd template, ExecStart at $PREFIX/bin
#
# `mount -t fuse.mediafs` and fstab lines need no file of ours: mount(8)
# runs fuse3's /sbin/mount.fuse, which runs `mediafs SOURCE MOUNTPOINT -o
# OPTIONS` through /bin/sh, so the binary is found on PATH (/usr/bin or
# /usr/local/bin; systemd's mount units have both on theirs).
set -euo pipefail

[ $# -eq 4 ] || { echo "usage: $0 BINARY DESTDIR PREFIX UNITDIR" >&2; exit 2; }
binary=$1 destdir=$2 prefix=$3 unitdir=$4
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
template=$repo/contrib/mediafs@.service
# The template as checked in names the binary where `make install`'s
# default PREFIX puts it; the copy installed names $PREFIX's.
checked_in=/usr/local/bin/mediafs

[ -x "$binary" ] || { echo "install-files: no executable at $binary (make build)" >&2; exit 1; }
case $prefix in /*) ;; *) echo "install-files: PREFIX must be absolute, not '$prefix'" >&2; exit 1;; esac
case $unitdir in /*) ;; *) echo "install-files: UNITDIR must be absolute, not '$unitdir'" >&2; exit 1;; esac
grep -q "^ExecStart=$checked_in " "$template" \
    || { echo "install-files: $template no longer starts $checked_in; update $0" >&2; exit 1; }

install -d "$destdir$prefix/bin" "$destdir$prefix/share/man/man1" "$destdir$unitdir"
# The build tree's binary keeps its symbols (gdb); the installed one drops
# them and the debug sections: 80.6 MB -> 60.8 MB (docs/decisions/0044).
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
    -o "$destdir$prefix/bin/mediafs" "$binary"
chmod 0755 "$destdir$prefix/bin/mediafs"
gzip -9n -c "$repo/man/mediafs.1" > "$destdir$prefix/share/man/man1/mediafs.1.gz"
chmod 0644 "$destdir$prefix/share/man/man1/mediafs.1.gz"
sed "s|$checked_in |$prefix/bin/mediafs |" "$template" > "$destdir$unitdir/mediafs@.service"
chmod 0644 "$destdir$unitdir/mediafs@.service"
