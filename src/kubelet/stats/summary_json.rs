//! The stats summary (stats/v1alpha1 `Summary`) as `/stats/summary` serves
//! it: the node's CPU, memory, filesystems and process limits, the pods
//! cgroup as a system container, and per pod its containers, volumes,
//! ephemeral storage and processes. Unset values are left out, as Go's
//! `omitempty` pointers are; CPU rates appear from the second sample on.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::resource::{CpuMemory, ResourceUsage};
use super::types::{FsStats, InterfaceStats, MemoryStats, NetworkStats, Summary};

fn time(t: SystemTime) -> Value {
    let ts = Timestamp::try_from(t).unwrap_or(Timestamp::UNIX_EPOCH);
    Value::String(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

fn put(obj: &mut Map<String, Value>, key: &str, v: Option<impl Into<Value>>) {
    if let Some(v) = v {
        obj.insert(key.to_string(), v.into());
    }
}

fn memory(m: &MemoryStats) -> Value {
    let mut o = Map::new();
    put(&mut o, "time", m.time.map(time));
    put(&mut o, "availableBytes", m.available_bytes);
    put(&mut o, "usageBytes", m.usage_bytes);
    put(&mut o, "workingSetBytes", m.working_set_bytes);
    put(&mut o, "rssBytes", m.rss_bytes);
    put(&mut o, "pageFaults", m.page_faults);
    put(&mut o, "majorPageFaults", m.major_page_faults);
    Value::Object(o)
}

fn interface(i: &InterfaceStats) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("name".into(), json!(i.name));
    o.insert("rxBytes".into(), json!(i.rx_bytes));
    o.insert("rxErrors".into(), json!(i.rx_errors));
    o.insert("txBytes".into(), json!(i.tx_bytes));
    o.insert("txErrors".into(), json!(i.tx_errors));
    o
}

/// Go's NetworkStats: the default interface's counters inline, then all.
fn network(n: &NetworkStats) -> Value {
    let mut o = Map::new();
    put(&mut o, "time", n.time.map(time));
    if let Some(d) = n.default_interface() {
        o.extend(interface(d));
    }
    let all: Vec<Value> = n
        .interfaces
        .iter()
        .map(|i| Value::Object(interface(i)))
        .collect();
    o.insert("interfaces".into(), Value::Array(all));
    Value::Object(o)
}

fn fs(f: &FsStats) -> Value {
    let mut o = Map::new();
    put(&mut o, "time", f.time.map(time));
    put(&mut o, "availableBytes", f.available_bytes);
    put(&mut o, "capacityBytes", f.capacity_bytes);
    put(&mut o, "usedBytes", f.used_bytes);
    put(&mut o, "inodesFree", f.inodes_free);
    put(&mut o, "inodes", f.inodes);
    put(&mut o, "inodesUsed", f.inodes_used);
    Value::Object(o)
}

/// CPU usage rates need two samples: the last cumulative value of each
/// cgroup (node, pod, container) is kept between requests.
#[derive(Debug, Default)]
pub struct CpuRates(Mutex<HashMap<String, (SystemTime, u64)>>);

impl CpuRates {
    fn cpu(&self, key: &str, u: &CpuMemory) -> Option<Value> {
        let total = u.cpu_usage_ns?;
        let mut o = Map::new();
        o.insert("time".into(), time(u.time));
        let mut last = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((t0, v0)) = last.get(key)
            && let Ok(dt) = u.time.duration_since(*t0)
            && !dt.is_zero()
            && total >= *v0
        {
            let rate = (total - v0) as f64 / dt.as_secs_f64();
            o.insert("usageNanoCores".into(), json!(rate as u64));
        }
        o.insert("usageCoreNanoSeconds".into(), json!(total));
        last.insert(key.to_string(), (u.time, total));
        Some(Value::Object(o))
    }
}

/// The summary as JSON; with `only_cpu_and_memory`, nothing but CPU and
/// memory (and the pods' references).
pub fn summary_json(
    s: &Summary,
    usage: &ResourceUsage,
    rates: &CpuRates,
    only_cpu_and_memory: bool,
) -> Value {
    let full = !only_cpu_and_memory;
    let mut node = Map::new();
    node.insert("nodeName".into(), json!(s.node.node_name));
    let mut pods_container = Map::new();
    pods_container.insert("name".into(), json!("pods"));
    put(
        &mut pods_container,
        "startTime",
        s.node.allocatable_start_time.map(time),
    );
    put(
        &mut pods_container,
        "cpu",
        usage
            .allocatable
            .as_ref()
            .and_then(|u| rates.cpu("pods", u)),
    );
    put(
        &mut pods_container,
        "memory",
        s.node.allocatable_memory.as_ref().map(memory),
    );
    node.insert("systemContainers".into(), json!([pods_container]));
    put(&mut node, "startTime", s.node.start_time.map(time));
    put(
        &mut node,
        "cpu",
        usage.node.as_ref().and_then(|u| rates.cpu("node", u)),
    );
    put(&mut node, "memory", s.node.memory.as_ref().map(memory));
    if full {
        put(&mut node, "network", s.node.network.as_ref().map(network));
        put(&mut node, "fs", s.node.fs.as_ref().map(fs));
        if let Some(image) = &s.node.image_fs {
            node.insert("runtime".into(), json!({"imageFs": fs(image)}));
        }
        if let Some(r) = &s.node.rlimit {
            let mut o = Map::new();
            put(&mut o, "time", r.time.map(time));
            put(&mut o, "maxpid", r.max_pid);
            put(&mut o, "curproc", r.num_of_running_processes);
            node.insert("rlimit".into(), Value::Object(o));
        }
    }
    let pod_cpu: HashMap<(&str, &str), &CpuMemory> = usage
        .pods
        .iter()
        .map(|p| ((p.namespace.as_str(), p.name.as_str()), &p.usage))
        .collect();
    let container_cpu: HashMap<(&str, &str, &str), &CpuMemory> = usage
        .containers
        .iter()
        .map(|c| {
            (
                (c.namespace.as_str(), c.pod.as_str(), c.name.as_str()),
                &c.usage,
            )
        })
        .collect();
    let mut pods = Vec::new();
    for p in &s.pods {
        let mut o = Map::new();
        o.insert(
            "podRef".into(),
            json!({"name": p.name, "namespace": p.namespace, "uid": p.uid}),
        );
        let mut containers = Vec::new();
        for c in &p.containers {
            let mut co = Map::new();
            co.insert("name".into(), json!(c.name));
            put(&mut co, "startTime", c.start_time.map(time));
            let key = (p.namespace.as_str(), p.name.as_str(), c.name.as_str());
            if let Some(u) = container_cpu.get(&key) {
                let id = format!("{}/{}/{}", p.namespace, p.name, c.name);
                put(&mut co, "cpu", rates.cpu(&id, u));
            }
            put(&mut co, "memory", c.memory.as_ref().map(memory));
            if full {
                put(&mut co, "rootfs", c.rootfs.as_ref().map(fs));
                put(&mut co, "logs", c.logs.as_ref().map(fs));
            }
            containers.push(Value::Object(co));
        }
        put(&mut o, "startTime", p.start_time.map(time));
        o.insert("containers".into(), Value::Array(containers));
        if let Some(u) = pod_cpu.get(&(p.namespace.as_str(), p.name.as_str())) {
            put(&mut o, "cpu", rates.cpu(&p.uid, u));
        }
        put(&mut o, "memory", p.memory.as_ref().map(memory));
        if full {
            put(&mut o, "network", p.network.as_ref().map(network));
            if !p.volume_stats.is_empty() {
                let vols: Vec<Value> = p
                    .volume_stats
                    .iter()
                    .map(|v| {
                        let mut vo = match fs(&v.fs) {
                            Value::Object(m) => m,
                            _ => Map::new(),
                        };
                        vo.insert("name".into(), json!(v.name));
                        Value::Object(vo)
                    })
                    .collect();
                o.insert("volume".into(), Value::Array(vols));
            }
            put(
                &mut o,
                "ephemeral-storage",
                p.ephemeral_storage.as_ref().map(fs),
            );
            if let Some(ps) = &p.process_stats {
                let mut po = Map::new();
                put(&mut po, "process_count", ps.process_count);
                o.insert("process_stats".into(), Value::Object(po));
            }
        }
        pods.push(Value::Object(o));
    }
    json!({"node": node, "pods": pods})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::stats::{ContainerStats, NodeStats, PodStats, PodUsage, VolumeStats};
    use std::time::{Duration, UNIX_EPOCH};

    fn at(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(s)
    }

    #[test]
    fn shape_and_cpu_rates() {
        let mem = MemoryStats {
            time: Some(at(100)),
            available_bytes: Some(10),
            usage_bytes: Some(30),
            working_set_bytes: Some(20),
            rss_bytes: Some(5),
            ..Default::default()
        };
        let summary = Summary {
            node: NodeStats {
                node_name: "n1".into(),
                memory: Some(mem.clone()),
                fs: Some(FsStats {
                    time: Some(at(100)),
                    capacity_bytes: Some(100),
                    ..Default::default()
                }),
                start_time: Some(at(7)),
                network: Some(NetworkStats {
                    time: Some(at(100)),
                    interfaces: vec![
                        InterfaceStats {
                            name: "eth0".into(),
                            rx_bytes: 1,
                            rx_errors: 2,
                            tx_bytes: 3,
                            tx_errors: 4,
                        },
                        InterfaceStats {
                            name: "cni0".into(),
                            ..Default::default()
                        },
                    ],
                }),
                ..Default::default()
            },
            pods: vec![PodStats {
                name: "web".into(),
                namespace: "default".into(),
                uid: "u1".into(),
                containers: vec![ContainerStats {
                    name: "c".into(),
                    memory: Some(mem.clone()),
                    ..Default::default()
                }],
                volume_stats: vec![VolumeStats {
                    name: "cache".into(),
                    fs: FsStats {
                        used_bytes: Some(4096),
                        ..Default::default()
                    },
                }],
                ..Default::default()
            }],
        };
        let usage = |t: u64, ns: u64| ResourceUsage {
            node: Some(CpuMemory {
                time: at(t),
                cpu_usage_ns: Some(ns),
                memory_working_set_bytes: None,
            }),
            pods: vec![PodUsage {
                name: "web".into(),
                namespace: "default".into(),
                usage: CpuMemory {
                    time: at(t),
                    cpu_usage_ns: Some(ns / 2),
                    memory_working_set_bytes: None,
                },
            }],
            containers: vec![],
            allocatable: None,
        };
        let rates = CpuRates::default();
        let first = summary_json(&summary, &usage(100, 1_000_000_000), &rates, false);
        assert_eq!(
            first["node"]["cpu"],
            json!({"time": "1970-01-01T00:01:40Z", "usageCoreNanoSeconds": 1_000_000_000u64})
        );
        assert_eq!(first["node"]["memory"]["workingSetBytes"], 20);
        assert_eq!(first["node"]["memory"]["rssBytes"], 5);
        assert_eq!(first["node"]["startTime"], "1970-01-01T00:00:07Z");
        assert_eq!(
            first["node"]["network"],
            json!({"time": "1970-01-01T00:01:40Z", "name": "eth0", "rxBytes": 1, "rxErrors": 2,
                "txBytes": 3, "txErrors": 4, "interfaces": [
                {"name": "eth0", "rxBytes": 1, "rxErrors": 2, "txBytes": 3, "txErrors": 4},
                {"name": "cni0", "rxBytes": 0, "rxErrors": 0, "txBytes": 0, "txErrors": 0}]})
        );
        assert_eq!(
            first["node"]["fs"],
            json!({"time": "1970-01-01T00:01:40Z", "capacityBytes": 100})
        );
        assert_eq!(
            first["pods"][0]["podRef"],
            json!({"name": "web", "namespace": "default", "uid": "u1"})
        );
        assert_eq!(
            first["pods"][0]["volume"],
            json!([{"usedBytes": 4096, "name": "cache"}])
        );
        assert_eq!(first["pods"][0]["containers"][0]["name"], "c");
        // Ten seconds and two CPU-seconds later: 0.2 cores on the node.
        let second = summary_json(&summary, &usage(110, 3_000_000_000), &rates, true);
        assert_eq!(second["node"]["cpu"]["usageNanoCores"], 200_000_000u64);
        assert_eq!(second["pods"][0]["cpu"]["usageNanoCores"], 100_000_000u64);
        assert!(second["node"].get("fs").is_none());
        assert!(second["pods"][0].get("volume").is_none());
    }
}
