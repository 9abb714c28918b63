#!/usr/bin/env bash
# The project's test command: makes sure the containerd rig's packages are
# installed (Debian) and a Rust toolchain is there, builds the offline test
# images once, then runs
# `cargo test` with any arguments given. Tests start their own private
# containerd instances (deploy/rig/containerd.sh); nothing system-wide runs.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
AS_ROOT_OPTIONAL=1 . deploy/rig/as-root.sh

bash deploy/rig/install.sh
bash deploy/rig/toolchain.sh
export PATH="$HOME/.cargo/bin:$PATH"
archive=$(bash deploy/rig/build-images.sh)
echo "rig: test images in $archive"
cargo test "$@"
