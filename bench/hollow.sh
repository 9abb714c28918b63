#!/usr/bin/env bash
# Hollow nodes bench (issue 17): N hollow nodes x M pods per node in one
# `kubelet hollow` process, against the API server double by default or
# the real kube-apiserver whose admin kubeconfig KUBELET_RS_TEST_KUBECONFIG
# names (tests/support/apiserver/README.md). Printed figures only: time to
# all Nodes Ready, pod creation -> Running p50/p99, the process's RSS (and
# per node), steady CPU per node, API requests per node per minute by verb
# and resource (the ignored `hollow_bench` test of tests/hollow.rs).
#
#   bench/hollow.sh [NODES:PODS ...]      default: 100:10
#
# BENCH_PROFILE: release (default) or debug, for the kubelet binary
# (BENCH_KUBELET names another kubelet binary); BENCH_DRIVER_PROFILE
# (release, the default, or debug) for the driver and the API server
# double, which run in the test process (a debug double is the bottleneck
# at 100 nodes). HOLLOW_STEADY_SECS:
# the steady-state window (default 60). HOLLOW_LOG: a file for the hollow
# process's log (default: none). Needs no root and no containerd.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

profile=${BENCH_PROFILE:-release}
if [ -z "${BENCH_KUBELET:-}" ]; then
	if [ "$profile" = release ]; then
		cargo build --release --bin kubelet >&2
	else
		cargo build --bin kubelet >&2
	fi
fi
kubelet_bin=${BENCH_KUBELET:-$repo/target/$profile/kubelet}
cargo_profile=()
[ "${BENCH_DRIVER_PROFILE:-release}" = release ] && cargo_profile=(--release)
cargo test "${cargo_profile[@]}" --test hollow --no-run >&2

[ $# -gt 0 ] || set -- 100:10
for run in "$@"; do
	echo
	HOLLOW_NODES=${run%%:*} HOLLOW_PODS=${run#*:} HOLLOW_KUBELET=$kubelet_bin \
		cargo test "${cargo_profile[@]}" --quiet --test hollow bench::hollow_bench -- \
		--ignored --exact --nocapture 2>&1 |
		grep -v -e '^\.*$' -e '^running [0-9]* test' -e '^test result' -e "^test bench::hollow_bench" -e '^$' || true
done
