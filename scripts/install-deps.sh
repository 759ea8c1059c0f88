#!/usr/bin/env bash
# Installs what building and testing mediafs needs on Debian 12, and only
# what is missing: a second run touches neither apt nor pip.
set -euo pipefail

# What mediafs links against, serves its tests with, and probes media with.
PROJECT_PACKAGES=(fuse3 libfuse3-dev libcurl4-openssl-dev libssl-dev libmicrohttpd-dev nginx-light ffmpeg attr
                  pkg-config ca-certificates)
# SFTP listings go through libssh2 itself (libcurl reads the files); the
# SFTP tests start OpenSSH's sshd with a config of their own (the packaged
# service is not used) and make keys with ssh-keygen.
PROJECT_PACKAGES+=(libssh2-1-dev openssh-server openssh-sftp-server openssh-client)
# What the proxy, TLS and cache-tier tests need besides: openssl makes the
# private CA's certificate. nginx-light already has the ssl and slice modules.
PROJECT_PACKAGES+=(openssl)
# The WebDAV tests' first real server: Apache httpd with mod_dav, started by
# the tests with a config of their own (the packaged service is not used).
PROJECT_PACKAGES+=(apache2)
# The status page's test loads it in a real headless browser.
PROJECT_PACKAGES+=(chromium)
# The remote control's tests drive it with rclone's own client (`rclone rc`);
# apache2 brings htpasswd for their htpasswd file.
PROJECT_PACKAGES+=(rclone)
# The SFTP bench's peer (`make bench --only sftp`): sshfs beside rclone :sftp:.
PROJECT_PACKAGES+=(sshfs)
# The archive tests check the members' bytes against what unar extracts.
PROJECT_PACKAGES+=(unar)
# `make deb` and the package's test: dpkg-shlibdeps (Depends), lintian, and
# debootstrap for the fresh Debian root the package is installed into.
PROJECT_PACKAGES+=(dpkg-dev lintian debootstrap)
# What the Swift toolchain in /opt/swift needs to compile and link on Debian 12.
SWIFT_PACKAGES=(binutils libc6-dev libgcc-12-dev libstdc++-12-dev zlib1g-dev
                libsqlite3-0 libncurses6 libxml2 libedit2 tzdata)
SWIFT_BIN=/opt/swift/usr/bin

say() { printf 'install-deps: %s\n' "$*"; }

is_installed() {
    [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

missing=()
for pkg in "${PROJECT_PACKAGES[@]}" "${SWIFT_PACKAGES[@]}"; do
    is_installed "$pkg" || missing+=("$pkg")
done

if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        say "missing Debian packages: ${missing[*]}"
        say "run this script as root (or: sudo apt-get install ${missing[*]})"
        exit 1
    fi
    say "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
else
    say "Debian packages: all present"
fi

# Debian's own python3 refuses a plain pip install (PEP 668); fall back to
# overriding that, then to the Debian package.
if python3 -c 'import pytest' 2>/dev/null; then
    say "pytest: present"
else
    say "installing pytest"
    python3 -m pip install --quiet pytest \
        || python3 -m pip install --quiet --break-system-packages pytest \
        || { export DEBIAN_FRONTEND=noninteractive; apt-get update && apt-get install -y python3-pytest; }
    python3 -c 'import pytest' || { say "pytest still not importable by $(command -v python3)"; exit 1; }
fi

# The integration suite runs on several workers (make test's JOBS).
if python3 -c 'import xdist' 2>/dev/null; then
    say "pytest-xdist: present"
else
    say "installing pytest-xdist"
    python3 -m pip install --quiet pytest-xdist \
        || python3 -m pip install --quiet --break-system-packages pytest-xdist \
        || { export DEBIAN_FRONTEND=noninteractive; apt-get update && apt-get install -y python3-pytest-xdist; }
    python3 -c 'import xdist' || { say "pytest-xdist still not importable by $(command -v python3)"; exit 1; }
fi

# The tests parse /metrics with a real Prometheus exposition parser.
if python3 -c 'import prometheus_client.parser' 2>/dev/null; then
    say "prometheus_client: present"
else
    say "installing prometheus_client"
    python3 -m pip install --quiet prometheus_client \
        || python3 -m pip install --quiet --break-system-packages prometheus_client \
        || { export DEBIAN_FRONTEND=noninteractive; apt-get update && apt-get install -y python3-prometheus-client; }
    python3 -c 'import prometheus_client.parser' \
        || { say "prometheus_client still not importable by $(command -v python3)"; exit 1; }
fi

# The S3 tests serve a real S3 API with moto in server mode and check every
# signature with botocore's signer; boto3 fills the buckets.
if python3 -c 'import moto.server, boto3, botocore.auth' 2>/dev/null; then
    say "moto, boto3: present"
else
    say "installing moto[server], boto3"
    python3 -m pip install --quiet 'moto[server]' boto3 \
        || python3 -m pip install --quiet --break-system-packages 'moto[server]' boto3
    python3 -c 'import moto.server, boto3, botocore.auth' \
        || { say "moto or boto3 still not importable by $(command -v python3)"; exit 1; }
fi

# The WebDAV tests' second server, which writes its XML another way.
if python3 -c 'import wsgidav, cheroot' 2>/dev/null; then
    say "wsgidav: present"
else
    say "installing wsgidav and cheroot"
    python3 -m pip install --quiet wsgidav cheroot \
        || python3 -m pip install --quiet --break-system-packages wsgidav cheroot
    python3 -c 'import wsgidav, cheroot' || { say "wsgidav still not importable by $(command -v python3)"; exit 1; }
fi

# The FTP tests' server: pyftpdlib, plain and with AUTH TLS (pyOpenSSL).
if python3 -c 'import pyftpdlib, OpenSSL' 2>/dev/null; then
    say "pyftpdlib: present"
else
    say "installing pyftpdlib and pyopenssl"
    python3 -m pip install --quiet pyftpdlib pyopenssl \
        || python3 -m pip install --quiet --break-system-packages pyftpdlib pyopenssl
    python3 -c 'import pyftpdlib, OpenSSL' || { say "pyftpdlib still not importable by $(command -v python3)"; exit 1; }
fi

if command -v swift >/dev/null 2>&1; then
    say "swift: $(command -v swift)"
elif [ -x "$SWIFT_BIN/swift" ]; then
    say "swift: $SWIFT_BIN/swift (not on PATH; the Makefile adds it)"
else
    say "no Swift toolchain: expected swift on PATH or in $SWIFT_BIN"
    exit 1
fi

if [ ! -e /dev/fuse ]; then
    say "warning: /dev/fuse is missing; the mount tests will be skipped"
fi
