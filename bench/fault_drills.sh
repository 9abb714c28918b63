#!/usr/bin/env bash
# The reliability drills with more cases than CI runs, printing what each
# showed: the SIGKILL-while-starting drill at 10 kill points (30 pods), and
# the property tests over outside bytes (parsers, and odd cgroup/procfs
# files under the statistics) at 20,000 cases each.
# Usage: bench/fault_drills.sh [kills] [fuzz cases]   (defaults: 10 20000)
# KUBELET_RS_DRILL_SEED replays the kill points of an earlier run.
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${1:-10}
cases=${2:-20000}
KUBELET_RS_DRILL_KILLS=$kills cargo test -q --test fault_drills -- --nocapture 2>&1 |
  grep -E '^(fault drill|round|all .* settled|test result)'
start=$(date +%s)
KUBELET_RS_FUZZ_CASES=$cases cargo test -q --test hostile_input 2>&1 | grep -E '^test result'
echo "hostile input: 10 properties x $cases cases in $(( $(date +%s) - start )) s"
start=$(date +%s)
KUBELET_RS_FUZZ_CASES=$cases cargo test -q --test hostile_cgroups 2>&1 | grep -E '^test result'
echo "hostile cgroup files: 2 properties (v1, v2) x $cases cases in $(( $(date +%s) - start )) s"
