#!/usr/bin/env bash
# Builds the test images offline and prints the path of the OCI archive.
#
#   deploy/rig/build-images.sh            # → target/test-images/<hash>/images.tar
#
# The archive is cached under a hash of every input (pause.c, the compiler,
# the busybox binary, build.py, images.env): a second call with the same
# inputs only prints the path. KUBELET_RS_IMAGE_DIR overrides the cache dir.
set -euo pipefail

rig_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$rig_dir/../.." && pwd)
images_src="$repo/deploy/images"
cache=${KUBELET_RS_IMAGE_DIR:-$repo/target/test-images}

busybox=${BUSYBOX:-}
if [ -z "$busybox" ]; then
	for candidate in /bin/busybox /usr/bin/busybox; do
		if [ -x "$candidate" ] && file -L "$candidate" 2>/dev/null | grep -q 'statically linked'; then
			busybox=$candidate
			break
		fi
	done
fi
if [ -z "$busybox" ] && [ -x /bin/busybox ]; then
	# `file` may be absent; Debian's busybox-static installs here.
	busybox=/bin/busybox
fi
[ -n "$busybox" ] || { echo "build-images: no static busybox found (run deploy/rig/install.sh)" >&2; exit 1; }
command -v gcc >/dev/null || { echo "build-images: gcc not found (run deploy/rig/install.sh)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "build-images: python3 not found" >&2; exit 1; }

hash=$( {
	sha256sum "$images_src/pause/pause.c" "$images_src/build.py" "$rig_dir/images.env" "$busybox" | cut -d' ' -f1
	gcc --version | head -n1
	uname -m
} | sha256sum | cut -c1-16)

out_dir="$cache/$hash"
archive="$out_dir/images.tar"
if [ -s "$archive" ]; then
	echo "$archive"
	exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ ! -s "$archive" ]; then
	work=$(mktemp -d "$cache/.build.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	gcc -static -Os -s -Wall -o "$work/pause" "$images_src/pause/pause.c"
	python3 "$images_src/build.py" --busybox "$busybox" --pause "$work/pause" \
		--names "$rig_dir/images.env" --out "$work/images.tar"
	mkdir -p "$out_dir"
	mv "$work/images.tar" "$archive"
fi
echo "$archive"
