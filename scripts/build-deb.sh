#!/usr/bin/env bash
# Builds mediafs_VERSION_ARCH.deb from a release binary with dpkg-deb (no
# debian/ source tree: the binary is built by `make build`, and this only
# packs it): the files scripts/install-files.sh installs for PREFIX=/usr,
# the config directory /etc/mediafs, the docs Debian policy asks for, and
# maintainer scripts. Prints the .deb's path.
#
#   scripts/build-deb.sh BINARY OUTDIR
#
# DEB_MAINTAINER overrides the Maintainer field (default: git's user, else
# the last commit's author).
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 BINARY OUTDIR" >&2; exit 2; }
binary=$1 outdir=$2
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
for tool in dpkg-deb dpkg-shlibdeps strip; do
    command -v "$tool" >/dev/null || { echo "build-deb: $tool missing (scripts/install-deps.sh)" >&2; exit 1; }
done

# The version: the binary's own (MediaCacheVersion, the one place it lives),
# then what git says of this tree. A tag vX.Y.Z must agree with it.
#   tagged vX.Y.Z, N commits on:  X.Y.Z+N.gHASH   (at the tag: X.Y.Z)
#   no tag:                       X.Y.Z+gitN.HASH  (N = commits in HEAD)
#   changes not committed:        ... .dirty
base=$(sed -n 's/.*static let string = "\([^"]*\)".*/\1/p' Sources/MediaSupport/MediaCacheVersion.swift)
[ -n "$base" ] || { echo "build-deb: no version in Sources/MediaSupport/MediaCacheVersion.swift" >&2; exit 1; }
if described=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
    tag=${described%%-*}
    [ "${tag#v}" = "$base" ] || { echo "build-deb: tag $tag but the binary says $base" >&2; exit 1; }
    version=$(printf '%s' "${described#v}" | sed -E 's/-([0-9]+)-g([0-9a-f]+)/+\1.g\2/; s/-dirty$/.dirty/')
elif described=$(git describe --always --dirty 2>/dev/null); then
    version="$base+git$(git rev-list --count HEAD).${described/-dirty/.dirty}"
else
    version=$base   # not a git tree (a tarball)
fi
dpkg --validate-version "$version" || { echo "build-deb: '$version' is not a Debian version" >&2; exit 1; }
arch=$(dpkg --print-architecture)
maintainer=${DEB_MAINTAINER:-}
if [ -z "$maintainer" ] && git config user.email >/dev/null; then
    maintainer="$(git config user.name) <$(git config user.email)>"
fi
[ -n "$maintainer" ] || maintainer=$(git log -1 --format='%an <%ae>' 2>/dev/null || true)
[ -n "$maintainer" ] || { echo "build-deb: set DEB_MAINTAINER='Name <address>'" >&2; exit 1; }
# The date of what is packed, not of the packing: the same commit packs the same.
date=$(git log -1 --format=%aD 2>/dev/null || date -R)

work=$(mktemp -d "${TMPDIR:-/tmp}/mediafs-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/mediafs_${version}_$arch
# Debian 12 keeps packaged units in /lib/systemd/system (lintian's rule there).
scripts/install-files.sh "$binary" "$stage" /usr /lib/systemd/system
# The config directory the service template reads (NAME.list, NAME.options):
# the admin's files in it are theirs, kept by `dpkg -r` and `dpkg -P`.
install -d -m 0755 "$stage/etc/mediafs"
doc=$stage/usr/share/doc/mediafs
install -d "$doc/examples"
install -m 0644 contrib/srv-media-films.mount "$doc/examples/"
install -m 0644 packaging/copyright "$doc/copyright"
printf 'mediafs (%s) unstable; urgency=medium\n\n  * Built from git %s.\n\n -- %s  %s\n' \
    "$version" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$maintainer" "$date" \
    | gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"

# Depends: what the binary links (dpkg-shlibdeps reads the libraries'
# shlibs and symbols files), and fuse3 for /sbin/mount.fuse and fusermount3.
mkdir -p "$work/shlibs/debian"
printf 'Source: mediafs\n\nPackage: mediafs\nArchitecture: any\n' > "$work/shlibs/debian/control"
shlibs=$(cd "$work/shlibs" && dpkg-shlibdeps -O "$stage/usr/bin/mediafs" 2>"$work/shlibdeps.err") \
    || { cat "$work/shlibdeps.err" >&2; exit 1; }
depends=${shlibs#shlibs:Depends=}
[ -n "$depends" ] && [ "$depends" != "$shlibs" ] || { echo "build-deb: dpkg-shlibdeps said '$shlibs'" >&2; exit 1; }

install -d "$stage/DEBIAN"
install -m 0755 packaging/postrm "$stage/DEBIAN/postrm"
install -m 0755 packaging/postinst "$stage/DEBIAN/postinst"
cat > "$stage/DEBIAN/control" <<CONTROL
Package: mediafs
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --apparent-size --exclude=DEBIAN "$stage" | cut -f1)
Depends: $depends, fuse3
Recommends: ca-certificates
Section: utils
Priority: optional
Description: read-only FUSE filesystem for remote media over HTTP, WebDAV and S3
 mediafs shows remote media (HTTP(S) URLs, HTML indexes, WebDAV collections,
 S3 prefixes, HLS and DASH videos, stored RAR and ZIP members) as ordinary
 read-only files. A program that reads one gets the bytes from an on-disk
 cache or, for the ranges not cached yet, from the server with HTTP range
 requests, cached as they pass.
 .
 The package holds the mediafs command, its manual page and a systemd
 template unit, mediafs@NAME, that mounts /etc/mediafs/NAME.list at
 /srv/media/NAME. Lines of type fuse.mediafs in /etc/fstab mount through
 fuse3's mount helper.
CONTROL
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) \
    > "$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/md5sums" "$stage/DEBIAN/control"

mkdir -p "$outdir"
deb=$outdir/mediafs_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
