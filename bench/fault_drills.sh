#!/usr/bin/env bash
# The reliability drills with more cases than CI runs, printing what each
# showed: the SIGKILL-while-starting drill at 10 kill points (30 pods), and
# the parser property tests at 20,000 cases each.
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
