#!/usr/bin/env bash
# Demo: generate a sample mp4 and a random file, serve them with nginx on
# 127.0.0.1, mount them with mediafs, and look at them through the mount.
# nginx and the mount keep running afterwards so you can play the video;
# the script prints how to stop both. Re-running cleans up the last run first.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${MEDIAFS_DEMO_DIR:-/tmp/mediafs-demo}"
BIN="${MEDIAFS_BIN:-$REPO/.build/release/mediafs}"
SERVE="$WORK/www" MNT="$WORK/mnt" CACHE="$WORK/cache"

say() { printf '\n== %s\n' "$*"; }

[ -x "$BIN" ] || { echo "demo: $BIN not found; run 'make build' first" >&2; exit 1; }

# --- leftovers of an earlier run
if grep -qs " $MNT " /proc/self/mountinfo; then
    say "unmounting the previous demo mount"
    fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT"
fi
if [ -s "$WORK/nginx.pid" ] && kill -0 "$(cat "$WORK/nginx.pid")" 2>/dev/null; then
    say "stopping the previous demo nginx"
    kill "$(cat "$WORK/nginx.pid")"
    for _ in $(seq 50); do kill -0 "$(cat "$WORK/nginx.pid" 2>/dev/null)" 2>/dev/null || break; sleep 0.1; done
fi
rm -rf "$CACHE" "$WORK/nginx.pid"
mkdir -p "$SERVE" "$MNT" "$WORK/temp"

# --- sample media (kept across runs)
if [ ! -s "$SERVE/sample.mp4" ]; then
    say "generating a 10 s test video"
    encoders="$(ffmpeg -hide_banner -encoders 2>/dev/null)"
    if [[ "$encoders" == *" libx264 "* ]]; then
        vcodec=(-c:v libx264 -preset veryfast -pix_fmt yuv420p)
    else
        vcodec=(-c:v mpeg4 -q:v 5)
    fi
    ffmpeg -hide_banner -loglevel error -y \
        -f lavfi -i testsrc=duration=10:size=640x360:rate=25 \
        -f lavfi -i sine=frequency=440:duration=10 \
        "${vcodec[@]}" -c:a aac -shortest "$SERVE/sample.mp4.part.mp4"
    mv "$SERVE/sample.mp4.part.mp4" "$SERVE/sample.mp4"
fi
if [ ! -s "$SERVE/random.bin" ]; then
    say "generating a 4 MiB random file"
    head -c $((4 * 1024 * 1024)) /dev/urandom > "$SERVE/random.bin.part"
    mv "$SERVE/random.bin.part" "$SERVE/random.bin"
fi

# --- nginx on a free port
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cat > "$WORK/nginx.conf" <<CONF
$( [ "$(id -u)" -eq 0 ] && echo "user root;" )
daemon on;
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 256; }
http {
    default_type application/octet-stream;
    access_log $WORK/nginx-access.log;
    client_body_temp_path $WORK/temp/body;
    proxy_temp_path $WORK/temp/proxy;
    fastcgi_temp_path $WORK/temp/fastcgi;
    uwsgi_temp_path $WORK/temp/uwsgi;
    scgi_temp_path $WORK/temp/scgi;
    sendfile on;
    server {
        listen 127.0.0.1:$PORT;
        root $SERVE;
    }
}
CONF
say "serving $SERVE at http://127.0.0.1:$PORT/"
nginx -p "$WORK" -e "$WORK/nginx-error.log" -c "$WORK/nginx.conf"

URL1="http://127.0.0.1:$PORT/sample.mp4"
URL2="http://127.0.0.1:$PORT/random.bin"

# --- mount (daemon mode: returns once the mount is ready)
say "mediafs mount --cache-dir $CACHE $URL1 $URL2 $MNT"
"$BIN" mount --cache-dir "$CACHE" "$URL1" "$URL2" "$MNT"

say "ls -l $MNT"
ls -l "$MNT"

say "ffprobe $MNT/sample.mp4"
ffprobe -hide_banner -v error -show_entries format=duration,size:stream=codec_name,width,height \
    -of default=noprint_wrappers=1 "$MNT/sample.mp4"

say "cmp: the mounted random.bin equals the served one"
cmp "$SERVE/random.bin" "$MNT/random.bin" && echo "identical"

say "mediafs status: what the cache holds now"
"$BIN" status "$MNT"

cat <<MSG

== The mount and nginx are still running.
Play:      mpv $MNT/sample.mp4
Read:      dd if=$MNT/random.bin bs=1M skip=2 count=1 status=none | od -A d -t x1 | head -3
Inspect:   getfattr -d $MNT/sample.mp4
Stop:      fusermount3 -u $MNT
           kill \$(cat $WORK/nginx.pid)
MSG
