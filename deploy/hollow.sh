#!/usr/bin/env bash
# Runs N hollow nodes (kubemark-style) in one process against the API
# server a kubeconfig names: nodes PREFIX-0 .. PREFIX-(N-1), each a whole
# kubelet (node status, lease, pod lifecycle, probes) over an in-memory
# container runtime. Runs in the foreground until SIGTERM/SIGINT; needs no
# root, no containerd, no cgroups. Each node's files live under one state
# directory (default: a temp dir, removed on exit).
#
#   deploy/hollow.sh N KUBECONFIG [PREFIX]      # PREFIX defaults to hollow
#
# Environment: WORK (state directory, kept when given), PROFILE (release,
# the default, or debug), KUBELET (a built kubelet binary to use instead),
# HOLLOW_ARGS (more flags: --machine-cpus=8, --machine-memory=32Gi,
# --max-pods=110, --node-labels=..., --register-with-taints=..., -v=2).
set -euo pipefail

if [ $# -lt 2 ]; then
	echo "usage: $0 N KUBECONFIG [PREFIX]" >&2
	exit 2
fi
nodes=$1
kubeconfig=$(realpath "$2")
prefix=${3:-hollow}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
kubelet_bin=${KUBELET:-}
if [ -z "$kubelet_bin" ]; then
	profile=${PROFILE:-release}
	if [ "$profile" = release ]; then
		cargo build --release --bin kubelet >&2
	else
		cargo build --bin kubelet >&2
	fi
	kubelet_bin=$repo/target/$profile/kubelet
fi

work=${WORK:-$(mktemp -d /tmp/kubelet-rs-hollow.XXXXXX)}
mkdir -p "$work"
kpid=
cleanup() {
	set +e
	if [ -n "$kpid" ]; then
		kill -TERM "$kpid" 2>/dev/null
		wait "$kpid" 2>/dev/null
	fi
	[ -n "${WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# shellcheck disable=SC2086
"$kubelet_bin" hollow \
	--nodes="$nodes" \
	--node-name-prefix="$prefix" \
	--state-dir="$work" \
	--kubeconfig="$kubeconfig" \
	${HOLLOW_ARGS:-} &
kpid=$!
wait "$kpid"
