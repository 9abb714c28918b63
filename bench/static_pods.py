#!/usr/bin/env python3
"""Drives a running kubelet through batches of static pause pods.

For each batch size N: writes N pod manifests into the kubelet's
staticPodPath at once, polls /pods on the read-only port until every pod
is Running, and prints the batch time, per-pod latency from manifest to
Running (p50/p99), and the kubelet's RSS and CPU during and after the
batch. Then removes the manifests and waits for the pods to go.

Usage: static_pods.py --manifests DIR --port PORT --pid PID --image IMAGE [N ...]
"""

import argparse
import json
import math
import os
import time
import urllib.request

CLK_TCK = os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 (1-based) of the whole line.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def pods(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/pods", timeout=10) as r:
        items = json.load(r).get("items") or []
    return {p["metadata"]["name"]: p for p in items}


def percentile(values, q):
    s = sorted(values)
    if not s:
        return float("nan")
    # Nearest rank.
    k = max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))
    return s[k]


def manifest(name, image):
    return json.dumps({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "pause", "image": image}],
        },
    })


def scrape(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as r:
        return r.read()


def cadvisor_scrape(args, n):
    """CPU and wall time of one /metrics/cadvisor scrape that gathers anew
    (the kubelet samples at most once per 10 s housekeeping interval): the
    kubelet's CPU during the scrape less its idle rate over the same time."""
    scrape(args.port, "/metrics/cadvisor")
    cpu0, t0 = cpu_seconds(args.pid), time.monotonic()
    time.sleep(11)
    idle_rate = (cpu_seconds(args.pid) - cpu0) / (time.monotonic() - t0)
    cpu1, t1 = cpu_seconds(args.pid), time.monotonic()
    body = scrape(args.port, "/metrics/cadvisor")
    wall = time.monotonic() - t1
    cpu = max(cpu_seconds(args.pid) - cpu1 - idle_rate * wall, 0.0)
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    if args.save_scrape:
        with open(os.path.join(args.save_scrape, f"cadvisor-{n}.prom"), "wb") as f:
            f.write(body)
    cpu2, t2 = cpu_seconds(args.pid), time.monotonic()
    scrape(args.port, "/metrics/cadvisor")
    cached = time.monotonic() - t2
    print(f"N={n}: /metrics/cadvisor scrape (fresh sample): {wall * 1000:.0f} ms wall, "
          f"{cpu * 1000:.0f} ms CPU, {series} series, {len(body) / 1024:.0f} KiB; "
          f"a cached scrape: {cached * 1000:.0f} ms wall, {(cpu_seconds(args.pid) - cpu2) * 1000:.0f} ms CPU")


def run_batch(args, n, node):
    names = [f"pause-{n}-{i}" for i in range(n)]
    cpu0 = cpu_seconds(args.pid)
    peak_rss = rss_kib(args.pid)
    start = time.monotonic()
    for name in names:
        tmp = os.path.join(args.manifests, f".{name}.json")
        with open(tmp, "w") as f:
            f.write(manifest(name, args.image))
        os.rename(tmp, os.path.join(args.manifests, f"{name}.json"))
    written = time.monotonic()
    running_at = {}
    while len(running_at) < n:
        if time.monotonic() - start > args.timeout:
            raise SystemExit(f"batch of {n}: only {len(running_at)} pods Running after {args.timeout}s")
        now_pods = pods(args.port)
        now = time.monotonic()
        for name in names:
            p = now_pods.get(f"{name}-{node}")
            if name not in running_at and p and (p.get("status") or {}).get("phase") == "Running":
                running_at[name] = now
        peak_rss = max(peak_rss, rss_kib(args.pid))
        time.sleep(args.poll)
    done = time.monotonic()
    cpu_batch = cpu_seconds(args.pid) - cpu0
    latencies = [running_at[name] - start for name in names]
    # Idle after the batch.
    time.sleep(args.settle)
    cpu1 = cpu_seconds(args.pid)
    time.sleep(args.idle)
    idle_cpu = (cpu_seconds(args.pid) - cpu1) / args.idle * 100
    idle_rss = rss_kib(args.pid)
    print(f"N={n}: batch {done - start:.2f}s (manifests written in {written - start:.3f}s); "
          f"manifest->Running p50 {percentile(latencies, 50):.2f}s p99 {percentile(latencies, 99):.2f}s "
          f"max {max(latencies):.2f}s (poll {args.poll}s)")
    print(f"N={n}: kubelet during batch: peak RSS {peak_rss / 1024:.1f} MiB, "
          f"CPU {cpu_batch:.2f}s ({cpu_batch / (done - start) * 100:.0f}% of one core)")
    print(f"N={n}: kubelet after batch ({n} pods running, {args.idle}s idle): RSS {idle_rss / 1024:.1f} MiB, "
          f"CPU {idle_cpu:.1f}% of one core")
    cadvisor_scrape(args, n)
    # Clean up before the next batch.
    for name in names:
        os.remove(os.path.join(args.manifests, f"{name}.json"))
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        left = [k for k in pods(args.port) if k.startswith(f"pause-{n}-")]
        if not left:
            break
        time.sleep(0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--manifests", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--poll", type=float, default=0.2)
    ap.add_argument("--settle", type=float, default=5.0)
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--save-scrape", default=os.environ.get("BENCH_SCRAPE_DIR"),
                    help="a directory to keep each /metrics/cadvisor answer in (cadvisor-N.prom)")
    ap.add_argument("sizes", type=int, nargs="*", default=[30, 100])
    args = ap.parse_args()
    print(f"kubelet idle before: RSS {rss_kib(args.pid) / 1024:.1f} MiB")
    for n in args.sizes:
        run_batch(args, n, args.node)


if __name__ == "__main__":
    main()
