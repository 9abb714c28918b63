#!/usr/bin/env bash
# Peak RSS of the kubelet binary refusing a YAML alias bomb as its config
# file (8 and 9 levels of 9 aliases, ~400 bytes), against the same binary
# refusing a plain syntax error: what the bomb itself costs.
# Usage: bench/yaml_bomb.sh [path/to/kubelet]   (default: target/debug/kubelet)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/debug/kubelet}
[ -x "$bin" ] || cargo build -q
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bomb() {
  local levels=$1 prev=a refs
  printf 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
  for i in $(seq 1 $((levels - 1))); do
    refs=$(printf "*$prev,%.0s" 1 2 3 4 5 6 7 8 9)
    printf 'l%d: &l%d [%s]\n' "$i" "$i" "${refs%,}"
    prev=l$i
  done
}
peak() { { /usr/bin/time -f %M "$bin" --config "$1" 2>&1 >/dev/null || true; } | tail -1; }
printf 'kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nfoo: [\n' > "$work/syntax.yaml"
base=$(peak "$work/syntax.yaml")
echo "baseline (syntax error): ${base} KiB peak RSS"
for levels in 8 9; do
  bomb "$levels" > "$work/bomb$levels.yaml"
  kb=$(peak "$work/bomb$levels.yaml")
  echo "bomb, $levels levels ($(wc -c < "$work/bomb$levels.yaml") bytes): ${kb} KiB peak RSS, $((kb - base)) KiB over the baseline"
done
