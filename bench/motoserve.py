#!/usr/bin/env python3
"""moto's S3 on a loopback port, filled by putting objects straight into
moto's backend in this process: 100,000 objects through moto's own HTTP API
took 5.5 minutes here, this way 4 s. What is served is the same moto.

Usage: motoserve.py SPEC.json PORT — SPEC is {"bucket": NAME, "many":
{"prefix": P, "count": N}, "files": {KEY: PATH}}; "many" objects are the
bench's scale files (scale.scale_content). Prints "ready" once serving;
exits when its stdin closes, so it never outlives the bench. Started and
stopped by integration/s3proxy.py's MotoServer (its `filler`).
"""
import json
import os
import sys

# This environment's CA-bundle variables break plain-http boto/moto.
for name in ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE"):
    os.environ.pop(name, None)

from moto.core import DEFAULT_ACCOUNT_ID  # noqa: E402
from moto.s3.models import s3_backends  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scale  # noqa: E402


def main():
    spec, port = json.load(open(sys.argv[1])), int(sys.argv[2])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    bucket = spec["bucket"]
    backend.create_bucket(bucket, "us-east-1")
    many = spec.get("many")
    if many:
        for i in range(many["count"]):
            backend.put_object(bucket, f"{many['prefix']}f{i:06d}.bin", scale.scale_content(i))
    for key, path in spec.get("files", {}).items():
        with open(path, "rb") as f:
            backend.put_object(bucket, key, f.read())
    print("ready", flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
