#!/usr/bin/env bash
# The project's test command: makes sure the containerd rig's packages are
# installed (Debian) and a Rust toolchain is there, builds the offline test
# images once, then runs
# `cargo test` with any arguments given (with none: the whole suite, the
# long API outage drill beside the rest). Tests start their own private
# containerd instances (deploy/rig/containerd.sh); nothing system-wide runs.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
AS_ROOT_OPTIONAL=1 . deploy/rig/as-root.sh

bash deploy/rig/install.sh
bash deploy/rig/toolchain.sh
export PATH="$HOME/.cargo/bin:$PATH"
archive=$(bash deploy/rig/build-images.sh)
echo "rig: test images in $archive"

if [ "$#" -gt 0 ]; then
    exec cargo test "$@"
fi

# The whole suite. The five-minute API outage drill (tests/api_outage.rs)
# spends nearly all its time waiting, so it runs beside the rest rather
# than after it: build every test binary, start that one in the background,
# run the others, then report both.
drill=api_server_away_for_minutes_under_load
cargo test --no-run
bin=$(cargo test --no-run --test api_outage --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "api_outage":
        print(m["executable"])')
log=$(mktemp /tmp/kubelet-rs-outage-drill.XXXXXX)
echo "rig: $drill runs in the background ($bin), output in $log"
"$bin" "$drill" --exact --nocapture >"$log" 2>&1 &
drill_pid=$!
status=0
cargo test -- --skip "$drill" || status=$?
drill_status=0
wait "$drill_pid" || drill_status=$?
echo "rig: $drill (background) output:"
cat "$log"
rm -f "$log"
if [ "$drill_status" -ne 0 ]; then
    echo "rig: $drill failed (exit $drill_status)" >&2
    status=1
fi
exit "$status"
