#!/usr/bin/env bash
# Static pod start-up bench: a release kubelet on a private containerd
# (deploy/rig), batches of N static pause pods written at once (default 30
# and 100), printed figures only (see bench/static_pods.py).
#
#   bench/static_pods.sh [N ...]
#
# Environment: BENCH_KUBELET (a kubelet binary; default: build
# target/release/kubelet), BENCH_DIR (work directory; default: a temp dir,
# removed afterwards), BENCH_PORT (read-only port; default 22255),
# BENCH_SCRAPE_DIR (keep each /metrics/cadvisor answer there as cadvisor-N.prom).
# Needs root (containerd, cgroups). Everything it starts and creates is
# stopped and removed on exit; the sysctls the kubelet tunes are restored.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
. deploy/rig/images.env

. deploy/rig/as-root.sh

kubelet_bin=${BENCH_KUBELET:-}
if [ -z "$kubelet_bin" ]; then
	cargo build --release --bin kubelet >&2
	kubelet_bin=$repo/target/release/kubelet
fi
work=${BENCH_DIR:-$(mktemp -d /tmp/kubelet-rs-bench.XXXXXX)}
port=${BENCH_PORT:-22255}
node=bench-node
mkdir -p "$work"/{manifests,root,pki,logs}

sysctls=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes)
declare -A saved
for s in "${sysctls[@]}"; do saved[$s]=$(cat "/proc/sys/$s"); done

kpid=
cleanup() {
	set +e
	if [ -n "$kpid" ]; then
		kill -TERM "$kpid" 2>/dev/null
		wait "$kpid" 2>/dev/null
	fi
	bash deploy/rig/containerd.sh stop "$work/rig" >/dev/null 2>&1
	# The kubelet makes its root dir a shared mount and mounts volumes below it.
	awk -v w="$work/" 'index($5, w) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
		umount -l "$m"
	done
	for s in "${sysctls[@]}"; do echo "${saved[$s]}" >"/proc/sys/$s"; done
	[ -n "${BENCH_DIR:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

bash deploy/rig/containerd.sh start "$work/rig" >&2
. "$work/rig/rig.env"
# The kubelet's cgroup root, under the rig's (removed with it).
root_rel="$RIG_CGROUP_ROOT/bench"
while read -r mnt; do
	mkdir -p "$mnt/$root_rel"
	if [ -f "$mnt/cpuset.cpus" ]; then
		for f in cpuset.cpus cpuset.mems; do
			cat "$mnt/$f" >"$mnt/$RIG_CGROUP_ROOT/$f" 2>/dev/null || true
			cat "$mnt/$f" >"$mnt/$root_rel/$f"
		done
	fi
done < <(awk '$9 == "cgroup" { print $5 }' /proc/self/mountinfo | sort -u)

cat >"$work/kubelet-conf.yml" <<CONF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: $work/manifests
cgroupRoot: /$root_rel
cgroupDriver: cgroupfs
failSwapOn: false
address: 127.0.0.1
port: $((port - 5))
readOnlyPort: $port
healthzPort: $((port - 7))
maxPods: 250
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
resolvConf: /etc/resolv.conf
CONF

# In its own session: stop signals reach it once, from this script.
KUBELET_RS_LOG_ROOT="$work/logs" setsid "$kubelet_bin" --config "$work/kubelet-conf.yml" \
	--root-dir "$work/root" --cert-dir "$work/pki" \
	--container-runtime-endpoint "$RIG_ENDPOINT" --hostname-override "$node" \
	2>"$work/kubelet.log" &
kpid=$!
for _ in $(seq 1 100); do
	curl -fs "http://127.0.0.1:$((port - 7))/healthz" >/dev/null 2>&1 && break
	sleep 0.2
done
echo "kubelet $("$kubelet_bin" --version) pid $kpid on containerd $RIG_SOCKET ($(nproc) CPUs)"
[ $# -gt 0 ] || set -- 30 100
python3 bench/static_pods.py --manifests "$work/manifests" --port "$port" --pid "$kpid" \
	--image "$PAUSE_IMAGE" --node "$node" "$@"
