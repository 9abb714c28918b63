#!/usr/bin/env python3
"""Builds the project's test images as one OCI image-layout archive, offline.

Every byte is a function of the inputs (the busybox binary, the pause binary,
the image names): tar entries are sorted, owned by root, dated at the epoch,
so the same inputs give the same digests on every machine. Layers are stored
uncompressed; their digest is also their diff id.

Usage: build.py --busybox PATH --pause PATH --names images.env --out ARCHIVE
"""

import argparse
import hashlib
import io
import json
import platform
import subprocess
import sys
import tarfile

LAYER = "application/vnd.oci.image.layer.v1.tar"
CONFIG = "application/vnd.oci.image.config.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
EPOCH = "1970-01-01T00:00:00Z"
HTDOCS = "usr/local/apache2/htdocs"


def arch():
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        machine, machine
    )


def read_env(path):
    names = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                names[key.strip()] = value.strip()
    return names


class Layer:
    """A deterministic tar: add entries in any order, they are written sorted."""

    def __init__(self):
        self.entries = {}

    def dir(self, name, mode=0o755):
        self.entries[name] = ("dir", mode, None)

    def file(self, name, data, mode=0o644):
        self.entries[name] = ("file", mode, data)

    def symlink(self, name, target):
        self.entries[name] = ("symlink", 0o777, target)

    def bytes(self):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name in sorted(self.entries):
                kind, mode, payload = self.entries[name]
                info = tarfile.TarInfo(name)
                info.mode = mode
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mtime = 0
                if kind == "dir":
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif kind == "symlink":
                    info.type = tarfile.SYMTYPE
                    info.linkname = payload
                    tar.addfile(info)
                else:
                    info.type = tarfile.REGTYPE
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
        return buf.getvalue()


def busybox_layer(busybox):
    with open(busybox, "rb") as f:
        binary = f.read()
    applets = subprocess.run(
        [busybox, "--list-full"], check=True, capture_output=True, text=True
    ).stdout.split()
    layer = Layer()
    for d in ["bin", "dev", "etc", "home", "proc", "sbin", "sys", "usr",
              "usr/bin", "usr/sbin", "usr/local", "usr/local/bin", "var", "var/www"]:
        layer.dir(d)
    layer.dir("tmp", 0o1777)
    layer.dir("root", 0o700)
    layer.file("bin/busybox", binary, 0o755)
    for path in applets:
        path = path.strip("/")
        if path and path != "bin/busybox":
            layer.symlink(path, "/bin/busybox")
    layer.file("etc/passwd",
               b"root:x:0:0:root:/root:/bin/sh\n"
               b"nobody:x:65534:65534:nobody:/home:/bin/false\n")
    layer.file("etc/group", b"root:x:0:\nnogroup:x:65534:\n")
    return layer.bytes()


def httpd_layer():
    layer = Layer()
    for d in ["usr", "usr/local", "usr/local/apache2", HTDOCS]:
        layer.dir(d)
    layer.file(HTDOCS + "/index.html", b"<html><body><h1>It works!</h1></body></html>\n")
    return layer.bytes()


def pause_layer(pause):
    with open(pause, "rb") as f:
        binary = f.read()
    layer = Layer()
    layer.file("pause", binary, 0o755)
    return layer.bytes()


def throwaway_layer():
    layer = Layer()
    layer.file("throwaway.txt", b"an image tests may delete\n")
    return layer.bytes()


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Archive:
    def __init__(self):
        self.blobs = {}
        self.index = []

    def blob(self, data, media_type):
        d = digest(data)
        self.blobs[d] = data
        return {"mediaType": media_type, "digest": d, "size": len(data)}

    def image(self, names, layers, config, comment):
        layer_descs = [self.blob(layer, LAYER) for layer in layers]
        cfg = {
            "created": EPOCH,
            "architecture": arch(),
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": [d["digest"] for d in layer_descs]},
            "history": [{"created": EPOCH, "created_by": comment}] * len(layers),
        }
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": self.blob(canonical(cfg), CONFIG),
            "layers": layer_descs,
        }
        mdesc = self.blob(canonical(manifest), MANIFEST)
        for name in names:
            tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
            entry = dict(mdesc)
            entry["platform"] = {"architecture": arch(), "os": "linux"}
            entry["annotations"] = {
                "io.containerd.image.name": name,
                "org.opencontainers.image.ref.name": tag,
            }
            self.index.append(entry)

    def write(self, out):
        index = {"schemaVersion": 2, "mediaType": INDEX, "manifests": self.index}
        files = {
            "oci-layout": canonical({"imageLayoutVersion": "1.0.0"}),
            "index.json": canonical(index),
        }
        for d, data in self.blobs.items():
            files["blobs/sha256/" + d.split(":", 1)[1]] = data
        layer = Layer()
        layer.dir("blobs")
        layer.dir("blobs/sha256")
        for name, data in files.items():
            layer.file(name, data)
        with open(out, "wb") as f:
            f.write(layer.bytes())


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--busybox", required=True)
    p.add_argument("--pause", required=True)
    p.add_argument("--names", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    names = read_env(args.names)

    bb = busybox_layer(args.busybox)
    archive = Archive()
    archive.image(
        [names["PAUSE_IMAGE"]],
        [pause_layer(args.pause)],
        {"Entrypoint": ["/pause"], "User": "65535:65535", "Env": [PATH_ENV], "WorkingDir": "/"},
        "kubelet-rs pause",
    )
    archive.image(
        [names["BUSYBOX_IMAGE"], names["BUSYBOX_E2E_IMAGE"]],
        [bb],
        {"Cmd": ["sh"], "Env": [PATH_ENV], "WorkingDir": "/"},
        "kubelet-rs busybox-static",
    )
    archive.image(
        [names["HTTPD_E2E_IMAGE"]],
        [bb, httpd_layer()],
        {
            "Cmd": ["httpd", "-f", "-v", "-p", "80", "-h", "/" + HTDOCS],
            "Env": [PATH_ENV],
            "ExposedPorts": {"80/tcp": {}},
            "WorkingDir": "/",
        },
        "kubelet-rs httpd (busybox httpd)",
    )
    archive.image(
        [names["THROWAWAY_IMAGE"]],
        [bb, throwaway_layer()],
        {"Cmd": ["sh"], "Env": [PATH_ENV], "WorkingDir": "/", "Labels": {"kubelet-rs": "throwaway"}},
        "kubelet-rs throwaway",
    )
    archive.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
