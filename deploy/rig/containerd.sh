#!/usr/bin/env bash
# A private containerd for tests and for trying the kubelet by hand: its own
# root, state, socket, runc root, CNI network and cgroup root, all under DIR,
# never touching the system's containerd.
#
#   containerd.sh start  DIR     write the config, start, wait for CRI, import images
#   containerd.sh stop   DIR     stop and remove every sandbox, container, mount,
#                                netns, CNI leftover and cgroup it made
#   containerd.sh config DIR     only write DIR/config.toml (and the CNI config)
#   containerd.sh import DIR [ARCHIVE]   import the test images (default: build them)
#   containerd.sh env    DIR     print RIG_* facts (socket, slot, cgroup root, ...)
#
# Facts are also kept in DIR/rig.env. Environment: RIG_SNAPSHOTTER forces
# overlayfs or native (default: overlayfs when an overlay mount works in DIR).
set -euo pipefail

rig_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=images.env
. "$rig_dir/images.env"

slots_dir=/run/kubelet-rs-rig
cni_bin_dir=${RIG_CNI_BIN_DIR:-/usr/lib/cni}

die() { echo "containerd.sh: $*" >&2; exit 1; }
log() { echo "containerd.sh: $*" >&2; }

usage() { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

[ $# -ge 2 ] || usage
cmd=$1
dir=$2
shift 2
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
sock="$dir/containerd.sock"

ctr_() { ctr --address "$sock" "$@"; }

# --- slot: a small number unique among running rigs; it names the bridge,
# the CNI network, the pod subnet and the cgroup root. -----------------------
claim_slot() {
	if [ -s "$dir/slot" ]; then
		cat "$dir/slot"
		return
	fi
	mkdir -p "$slots_dir"
	exec 8>"$slots_dir/.lock"
	flock 8
	local n owner
	for n in $(seq 1 250); do
		if [ -d "$slots_dir/$n" ]; then
			owner=$(cat "$slots_dir/$n/owner" 2>/dev/null || true)
			# A slot whose rig directory is gone was left by a killed run.
			if [ -n "$owner" ] && [ -d "$owner" ] && [ "$owner" != "$dir" ]; then
				continue
			fi
			rm -rf "${slots_dir:?}/$n"
		fi
		mkdir "$slots_dir/$n"
		echo "$dir" >"$slots_dir/$n/owner"
		echo "$n" >"$dir/slot"
		flock -u 8
		echo "$n"
		return
	done
	die "no free rig slot under $slots_dir"
}

release_slot() {
	local n
	n=$(cat "$dir/slot" 2>/dev/null || true)
	[ -n "$n" ] || return 0
	if [ "$(cat "$slots_dir/$n/owner" 2>/dev/null || true)" = "$dir" ]; then
		rm -rf "${slots_dir:?}/$n"
	fi
	rm -f "$dir/slot"
}

pick_snapshotter() {
	if [ -n "${RIG_SNAPSHOTTER:-}" ]; then
		echo "$RIG_SNAPSHOTTER"
		return
	fi
	local probe="$dir/.overlay-probe"
	mkdir -p "$probe/lower" "$probe/upper" "$probe/work" "$probe/merged"
	if mount -t overlay overlay -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" "$probe/merged" 2>/dev/null; then
		umount "$probe/merged"
		rm -rf "$probe"
		echo overlayfs
	else
		rm -rf "$probe"
		echo native
	fi
}

write_config() {
	local slot snap
	slot=$(claim_slot)
	snap=$(pick_snapshotter)
	local net="kubelet-rs-$slot" bridge="krs-br$slot" subnet="10.244.$slot.0/24"
	local cgroot="kubelet-rs-rig-$slot"
	mkdir -p "$dir/root" "$dir/state" "$dir/runc" "$dir/opt" "$dir/cni/net.d" "$dir/cni/ipam"
	cat >"$dir/rig.env" <<ENV
RIG_DIR=$dir
RIG_SOCKET=$sock
RIG_ENDPOINT=unix://$sock
RIG_SLOT=$slot
RIG_SNAPSHOTTER=$snap
RIG_CNI_NETWORK=$net
RIG_BRIDGE=$bridge
RIG_POD_SUBNET=$subnet
RIG_CGROUP_ROOT=$cgroot
ENV
	cat >"$dir/config.toml" <<TOML
# Written by deploy/rig/containerd.sh for a private, throw-away containerd.
version = 2
root = "$dir/root"
state = "$dir/state"
oom_score = 0
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "$sock"

[ttrpc]
  address = "$sock.ttrpc"

[debug]
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # No CAP_SYS_RESOURCE here: never ask for a lower OOM score than ours.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  max_container_log_line_size = 16384
  # Sandbox network namespaces live under DIR, not the shared /var/run/netns.
  netns_mounts_under_state_dir = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "$snap"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$dir/runc"

  # Per-registry hosts (DIR/certs.d/HOST/hosts.toml), read at each pull:
  # tests point a loopback registry at plain HTTP there.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$dir/certs.d"

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin_dir"
    conf_dir = "$dir/cni/net.d"
    max_conf_num = 1
TOML
	# containerd adds the loopback interface itself (with the loopback
	# plugin from bin_dir); the conflist covers eth0 and host ports.
	cat >"$dir/cni/net.d/10-kubelet-rs.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "$net",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$dir/cni/ipam",
        "ranges": [[{ "subnet": "$subnet" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    {
      "type": "portmap",
      "capabilities": { "portMappings": true }
    }
  ]
}
JSON
}

load_env() {
	[ -s "$dir/rig.env" ] || die "$dir has no rig.env (run: containerd.sh start $dir)"
	# shellcheck disable=SC1091
	. "$dir/rig.env"
}

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# ok, error, or nothing while containerd is still loading.
cri_status() {
	ctr_ plugins ls 2>/dev/null | awk '$1 == "io.containerd.grpc.v1" && $2 == "cri" { print $NF }'
}

start() {
	[ "$(id -u)" -eq 0 ] || die "containerd needs root"
	command -v containerd >/dev/null || die "containerd not installed (run deploy/rig/install.sh)"
	command -v runc >/dev/null || die "runc not installed (run deploy/rig/install.sh)"
	[ -x "$cni_bin_dir/bridge" ] || die "CNI plugins missing in $cni_bin_dir (run deploy/rig/install.sh)"
	if pid_alive "$(cat "$dir/containerd.pid" 2>/dev/null || true)"; then
		log "already running in $dir"
		return 0
	fi
	write_config
	load_env
	rm -f "$sock" "$sock.ttrpc"
	containerd --config "$dir/config.toml" </dev/null >>"$dir/containerd.log" 2>&1 &
	local pid=$!
	echo "$pid" >"$dir/containerd.pid"
	local i
	for i in $(seq 1 200); do
		if ! pid_alive "$pid"; then
			tail -n 30 "$dir/containerd.log" >&2 || true
			die "containerd exited during start-up (log: $dir/containerd.log)"
		fi
		if [ -S "$sock" ]; then
			case "$(cri_status)" in
			ok)
				log "containerd $pid ready on $sock (slot $RIG_SLOT, snapshotter $RIG_SNAPSHOTTER)"
				return 0
				;;
			error)
				grep -i 'failed to load plugin io.containerd.grpc.v1.cri' "$dir/containerd.log" >&2 || true
				die "the CRI plugin failed to load (log: $dir/containerd.log)"
				;;
			esac
		fi
		sleep 0.1
	done
	tail -n 30 "$dir/containerd.log" >&2 || true
	die "containerd did not become ready within 20s (log: $dir/containerd.log)"
}

import() {
	load_env
	local archive=${1:-}
	if [ -z "$archive" ]; then
		archive=$("$rig_dir/build-images.sh")
	fi
	ctr_ --namespace k8s.io images import --snapshotter "$RIG_SNAPSHOTTER" "$archive" >/dev/null
}

# Every process in the cgroup subtree, across all hierarchies, gets SIGKILL;
# then the subtree is removed bottom-up.
remove_cgroups() {
	local root=$1 mnt sub
	[ -n "$root" ] || return 0
	while read -r mnt; do
		sub="$mnt/$root"
		[ -d "$sub" ] || continue
		find "$sub" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null || true
		local i
		for i in $(seq 1 50); do
			find "$sub" -depth -type d -exec rmdir {} + 2>/dev/null || true
			[ -d "$sub" ] || break
			sleep 0.1
		done
		[ -d "$sub" ] && log "could not remove cgroup $sub"
	done < <(awk '$9 == "cgroup" || $9 == "cgroup2" { print $5 }' /proc/self/mountinfo | sort -u)
	return 0
}

# Mount points under a prefix, deepest first.
mounts_under() {
	awk -v p="$1" '{ if ($5 == p || index($5, p "/") == 1) print $5 }' /proc/self/mountinfo | sort -r -u
}

scrub_iptables() {
	local net=$1 table
	command -v iptables-save >/dev/null || return 0
	for table in nat filter; do
		local rules chains
		rules=$(iptables-save -t "$table" 2>/dev/null | grep -F "name: \\\"$net\\\"" | grep '^-A ' || true)
		[ -n "$rules" ] || continue
		chains=$(echo "$rules" | grep -o -- '-j CNI-[A-Za-z0-9_-]*' | awk '{ print $2 }' | sort -u || true)
		while IFS= read -r rule; do
			# shellcheck disable=SC2086
			eval "iptables -w -t $table -D ${rule#-A }" 2>/dev/null || true
		done <<<"$rules"
		for chain in $chains; do
			case "$chain" in CNI-HOSTPORT-*) continue ;; esac
			iptables -w -t "$table" -F "$chain" 2>/dev/null || true
			iptables -w -t "$table" -X "$chain" 2>/dev/null || true
		done
	done
}

stop() {
	[ -s "$dir/rig.env" ] || { log "nothing to stop in $dir"; return 0; }
	load_env
	local pid netns=() ids=() id
	pid=$(cat "$dir/containerd.pid" 2>/dev/null || true)

	# 1. While containerd still answers: note sandbox netns paths, then kill
	#    and delete every task and container it knows.
	if pid_alive "$pid" && [ -S "$sock" ]; then
		for ns in $(ctr_ namespaces ls -q 2>/dev/null); do
			for id in $(ctr_ --namespace "$ns" containers ls -q 2>/dev/null); do
				ids+=("$id")
				while IFS= read -r path; do
					netns+=("$path")
				done < <(ctr_ --namespace "$ns" containers info "$id" 2>/dev/null |
					grep -o '"path": *"/[^"]*netns[^"]*"' | sed 's/.*"\(\/[^"]*\)"$/\1/' || true)
				ctr_ --namespace "$ns" tasks kill --signal SIGKILL "$id" >/dev/null 2>&1 || true
			done
			for id in $(ctr_ --namespace "$ns" containers ls -q 2>/dev/null); do
				ctr_ --namespace "$ns" tasks delete --force "$id" >/dev/null 2>&1 || true
				ctr_ --namespace "$ns" containers delete "$id" >/dev/null 2>&1 || true
			done
		done
	fi

	# 2. containerd itself: SIGTERM, then SIGKILL after 10s.
	if pid_alive "$pid"; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do
			pid_alive "$pid" || break
			sleep 0.1
		done
		pid_alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/containerd.pid"

	# 3. Shims of this containerd (they outlive it by design).
	local shims
	shims=$(pgrep -f -- "containerd-shim.* -address $sock( |$)" || true)
	[ -z "$shims" ] || kill -KILL $shims 2>/dev/null || true

	# 4. Container processes and cgroups under the rig's cgroup root.
	remove_cgroups "$RIG_CGROUP_ROOT"

	# 5. Mounts under DIR (rootfs, shm, ...), deepest first.
	local m
	for m in $(mounts_under "$dir"); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
	done

	# 6. Network namespaces of sandboxes that were never torn down.
	for m in "${netns[@]}"; do
		[ -e "$m" ] || continue
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		rm -f "$m"
	done

	# 7. CNI leftovers: iptables rules and chains of this network, the bridge,
	#    the result cache.
	scrub_iptables "$RIG_CNI_NETWORK"
	if ip link show "$RIG_BRIDGE" >/dev/null 2>&1; then
		ip link delete "$RIG_BRIDGE" 2>/dev/null || log "could not delete bridge $RIG_BRIDGE"
	fi
	rm -f /var/lib/cni/results/"$RIG_CNI_NETWORK"-* 2>/dev/null || true
	# Sandbox ids are also known from the CRI plugin's own directories, for
	# when containerd was already dead.
	local sandboxes="$dir/root/io.containerd.grpc.v1.cri/sandboxes"
	if [ -d "$sandboxes" ]; then
		for id in "$sandboxes"/*; do
			[ -e "$id" ] && ids+=("$(basename "$id")")
		done
	fi
	for id in "${ids[@]}"; do
		rm -f /var/lib/cni/results/cni-loopback-"$id"-* 2>/dev/null || true
	done

	# 8. State and the slot.
	rm -rf "$dir/root" "$dir/state" "$dir/runc" "$dir/opt" "$dir/cni/ipam" "$sock" "$sock.ttrpc"
	release_slot
	log "stopped and cleaned $dir"
}

case "$cmd" in
start)
	start
	import "${1:-}"
	;;
stop) stop ;;
config) write_config ;;
import) import "${1:-}" ;;
env) load_env; cat "$dir/rig.env" ;;
*) usage ;;
esac
