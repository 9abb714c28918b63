#!/usr/bin/env bash
# Density bench (issue 15): batches of pause pods bound to one kubelet at
# once, in API-server mode. Against the API server double by default, or
# against the real kube-apiserver whose admin kubeconfig
# KUBELET_RS_TEST_KUBECONFIG names (tests/support/apiserver/README.md).
# Printed figures only: batch time, per-pod start latency p50/p90/p99,
# API requests per pod by verb and resource, the kubelet's RSS (idle,
# during, with the pods) and CPU.
#
#   bench/density.sh [PODS:QPS ...]      default: 30:5 30:50 100:50
#
# QPS is kubeAPIQPS (burst 2 x QPS unless DENSITY_BURST is set); events keep
# eventRecordQPS 5 / eventBurst 10 unless DENSITY_EVENT_QPS/_BURST say
# otherwise. DENSITY_CLUSTER_DNS=1 configures clusterDNS. BENCH_PROFILE:
# release (default) or debug: the kubelet binary and the driver are built
# with it (BENCH_KUBELET names another kubelet binary).
# The kubelet runs as its own process on a private containerd (deploy/rig);
# needs root. The sysctls the kubelet tunes are restored on exit.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
. deploy/rig/as-root.sh

profile=${BENCH_PROFILE:-release}
cargo_profile=()
[ "$profile" = release ] && cargo_profile=(--release)
cargo test "${cargo_profile[@]}" --test api_economy --no-run >&2

sysctls=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes)
declare -A saved
for s in "${sysctls[@]}"; do saved[$s]=$(cat "/proc/sys/$s"); done
restore() {
	for s in "${sysctls[@]}"; do echo "${saved[$s]}" >"/proc/sys/$s" 2>/dev/null || true; done
}
trap restore EXIT

[ $# -gt 0 ] || set -- 30:5 30:50 100:50
for run in "$@"; do
	pods=${run%%:*}
	qps=${run#*:}
	echo
	DENSITY_PODS=$pods DENSITY_QPS=$qps \
		cargo test "${cargo_profile[@]}" --quiet --test api_economy density -- \
		--ignored --exact --nocapture 2>&1 |
		grep -v -e '^\.*$' -e '^running [0-9]* test' -e '^test result' -e '^test density' -e '^$' || true
done
