#!/usr/bin/env bash
# Deep fuzzing (issue 18): each cargo-fuzz target of fuzz/ for SECONDS
# (default 60) on nightly, seeded from the repository's fixtures; prints
# the executions and the crashes (inputs kept under fuzz/artifacts/).
# A single allocation over 64 MiB or an RSS over 1 GiB counts as a crash,
# so an input that makes a parser allocate without bound is caught too.
#
#   bench/fuzz.sh [SECONDS] [TARGET ...]      default: 60, every target
#
# Needs the nightly toolchain and cargo-fuzz (installed here if missing).
# CI runs the bounded property tests of tests/hostile_input.rs instead.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
secs=${1:-60}
[ $# -gt 0 ] && shift
cd "$repo/fuzz"
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
[ $# -gt 0 ] || set -- $(cargo +nightly fuzz list)

fixtures=$repo/tests/fixtures
seed() {
	local target=$1 dir=corpus/$1
	mkdir -p "$dir"
	case $target in
	config_file)
		cp "$fixtures"/go-kubelet-examples/resource-managers/kubelet-config.yaml "$dir"/
		cp "$fixtures"/kubeletconfiguration-v1beta1-defaults.json "$dir"/ ;;
	static_pod)
		cp "$fixtures"/go-kubelet-examples/pod-*.json "$dir"/
		printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: pause\n' >"$dir"/pod.yaml ;;
	kubeconfig)
		printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n  user:\n    token: abc\n' >"$dir"/kubeconfig ;;
	request_path)
		printf '/containerLogs/ns/pod/c?tailLines=10&follow=true' >"$dir"/logs
		printf '/stats/summary?only_cpu_and_memory=true' >"$dir"/stats ;;
	cri_status)
		cp "$fixtures"/cri/*.bin "$dir"/ ;;
	small_parsers)
		printf '100Mi' >"$dir"/q
		printf '0-3,8,10-11' >"$dir"/cpus ;;
	cgroup_files)
		# v1: the files in the target's order, 0xff between them.
		printf '\x00500000000\xffuser 30\nsystem 10\n\xffnr_periods 10\nnr_throttled 2\nthrottled_time 3000\n\xff512\xff100000\xff50000\xff1\n\xff1000\xff2000\xff3\xffcache 1\nrss 2\ntotal_inactive_file 300\n\xffoom_kill 2\n\xff67108864\xffmax\xffmax\xff4\xffmax\xffMax open files 1024 4096 files\n\xff  eth0: 100 2 0 0 0 0 0 0 200 3 0 0 0 0 0 0\n' >"$dir"/v1
		# v2.
		printf '\x011\n\xffusage_usec 5000\nuser_usec 3000\nsystem_usec 1000\n\xff20\xff50000 100000\xff1000\xff2000\xffanon 20\nfile 10\ninactive_file 300\n\xffmax 3\noom_kill 2\n\xff67108864\xffmax\xff0\xffmax\xff4\xffmax\n' >"$dir"/v2 ;;
	merge_patch)
		cp "$fixtures"/go-kubelet-examples/pod-besteffort.json "$dir"/a
		cat "$fixtures"/go-kubelet-examples/pod-besteffort.json "$fixtures"/go-kubelet-examples/pod-burstable.json >"$dir"/ab ;;
	esac
}

total_runs=0
total_crashes=0
for t in "$@"; do
	seed "$t"
	log=$(mktemp)
	status=0
	cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -malloc_limit_mb=64 \
		-rss_limit_mb=1024 -max_len=65536 -print_final_stats=1 >"$log" 2>&1 || status=$?
	runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
	crashes=$(ls "artifacts/$t" 2>/dev/null | wc -l)
	echo "$t: ${runs:-0} inputs in ${secs} s, exit $status, $crashes crash input(s) in fuzz/artifacts/$t"
	if [ "$status" -ne 0 ]; then
		grep -E 'ERROR|panicked|SUMMARY|malloc\(|out-of-memory' "$log" | head -8 | sed 's/^/  /'
	fi
	total_runs=$((total_runs + ${runs:-0}))
	total_crashes=$((total_crashes + crashes))
	rm -f "$log"
done
echo "total: $total_runs inputs, $total_crashes crash input(s)"
