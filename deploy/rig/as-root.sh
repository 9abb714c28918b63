# Sourced by the project's entry scripts: runs the calling script as root.
# As root it does nothing; otherwise it re-runs the script through sudo
# (keeping the toolchain's and the scripts' settings) when sudo is there.
# Without sudo, AS_ROOT_OPTIONAL=1 lets the caller go on unprivileged
# (tests that need root then report SKIPPED); else it stops with a message.
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		exec sudo --preserve-env=PATH,HOME,CARGO_HOME,RUSTUP_HOME,CI,WORK,PROFILE,KUBELET_ARGS,BENCH_KUBELET \
			bash "$0" "$@"
	fi
	if [ "${AS_ROOT_OPTIONAL:-0}" != 1 ]; then
		echo "$(basename "$0"): needs root (containerd, cgroups, mounts) and there is no sudo; run it as root" >&2
		exit 1
	fi
	echo "$(basename "$0"): not root and no sudo: tests that need root are skipped" >&2
fi
