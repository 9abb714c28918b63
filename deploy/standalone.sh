#!/usr/bin/env bash
# Runs the kubelet on this machine in standalone mode, end to end: installs
# the rig's packages (containerd, runc, CNI plugins) and a Rust toolchain if
# missing, builds the kubelet, starts a private containerd with the test
# images imported, and runs the kubelet in the foreground with a sample
# static pod. Everything lives under one work directory (default: a temp
# dir); Ctrl-C stops the kubelet, then containerd, and removes it all.
#
#   deploy/standalone.sh                 # then: curl 127.0.0.1:10255/pods
#
# Environment: WORK (work directory, kept when given), PROFILE (release,
# the default, or debug), KUBELET_ARGS (extra kubelet flags, e.g. -v=4).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
. deploy/rig/as-root.sh

bash deploy/rig/install.sh
bash deploy/rig/toolchain.sh
export PATH="$HOME/.cargo/bin:$PATH"
profile=${PROFILE:-release}
if [ "$profile" = release ]; then
	cargo build --release --bin kubelet
else
	cargo build --bin kubelet
fi
kubelet_bin=$repo/target/$profile/kubelet
. deploy/rig/images.env

work=${WORK:-$(mktemp -d /tmp/kubelet-rs-standalone.XXXXXX)}
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
	[ -n "${WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

bash deploy/rig/containerd.sh start "$work/rig"
. "$work/rig/rig.env"
root_rel="$RIG_CGROUP_ROOT/kubelet"
while read -r mnt; do
	mkdir -p "$mnt/$root_rel"
	if [ -f "$mnt/cpuset.cpus" ]; then
		for f in cpuset.cpus cpuset.mems; do
			cat "$mnt/$f" >"$mnt/$RIG_CGROUP_ROOT/$f" 2>/dev/null || true
			cat "$mnt/$f" >"$mnt/$root_rel/$f"
		done
	fi
done < <(awk '$9 == "cgroup" || $9 == "cgroup2" { print $5 }' /proc/self/mountinfo | sort -u)

cat >"$work/kubelet-conf.yml" <<CONF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: $work/manifests
cgroupRoot: /$root_rel
cgroupDriver: cgroupfs
failSwapOn: false
readOnlyPort: 10255
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
clusterDomain: cluster.local
clusterDNS: [10.96.0.10]
resolvConf: /etc/resolv.conf
# The sample's images are imported offline and cannot be pulled again: no
# image GC, and disk eviction only near a really full disk (this machine's
# disk can read over Go's 85% image GC and 15%-free eviction defaults).
imageGCHighThresholdPercent: 100
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
CONF

cat >"$work/manifests/web.yaml" <<POD
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
spec:
  containers:
  - name: web
    image: $HTTPD_E2E_IMAGE
    ports:
    - containerPort: 80
      name: http
    readinessProbe:
      httpGet: {path: /, port: http}
      periodSeconds: 5
POD

echo "standalone: kubelet with static pods from $work/manifests; try: curl -s 127.0.0.1:10255/pods" >&2
# shellcheck disable=SC2086
# In its own session: stop signals reach it once, from this script.
KUBELET_RS_LOG_ROOT="$work/logs" setsid "$kubelet_bin" --config "$work/kubelet-conf.yml" \
	--root-dir "$work/root" --cert-dir "$work/pki" \
	--container-runtime-endpoint "$RIG_ENDPOINT" ${KUBELET_ARGS:-} &
kpid=$!
trap 'kill -TERM "$kpid" 2>/dev/null' INT TERM
wait "$kpid" || wait "$kpid" || true
kpid=
