#!/usr/bin/env bash
# Makes sure cargo (with rustfmt and clippy) is available: uses the one on
# PATH or in ~/.cargo/bin, else installs the stable toolchain with rustup.
set -euo pipefail

export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v cargo >/dev/null 2>&1; then
	echo "toolchain: installing Rust (stable) with rustup" >&2
	command -v curl >/dev/null 2>&1 || {
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends curl ca-certificates
	}
	curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs |
		sh -s -- -y --profile minimal --default-toolchain stable --component rustfmt,clippy
fi
for c in rustfmt clippy; do
	if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1 && command -v rustup >/dev/null 2>&1; then
		rustup component add "$c" >&2
	fi
done
cargo --version >&2
