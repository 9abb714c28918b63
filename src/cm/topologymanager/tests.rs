//! The topology manager's merge (Go's policy test tables, in short form)
//! and its admission over fake providers.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::*;
use crate::cm::admission::AllocationError;

/// `"01"`: NUMA nodes 0 and 1, preferred; `"01!"`: not preferred.
fn h(spec: &str) -> TopologyHint {
    let (bits, preferred) = match spec.strip_suffix('!') {
        Some(b) => (b, false),
        None => (spec, true),
    };
    let nodes: Vec<u32> = bits.chars().filter_map(|c| c.to_digit(10)).collect();
    TopologyHint::new(BitMask::of(&nodes), preferred)
}

/// One provider: resource → `None` (no preference) or its hints.
fn provider(resources: &[(&str, Option<&[&str]>)]) -> ProviderHints {
    resources
        .iter()
        .map(|(name, hints)| {
            (
                name.to_string(),
                hints.map(|l| l.iter().map(|s| h(s)).collect()),
            )
        })
        .collect()
}

fn fmt(hint: TopologyHint) -> String {
    match hint.numa_node_affinity {
        None => format!("nil{}", if hint.preferred { "" } else { "!" }),
        Some(m) => {
            let bits: String = m.bits().iter().map(u32::to_string).collect();
            format!("{bits}{}", if hint.preferred { "" } else { "!" })
        }
    }
}

#[test]
fn merge_table_per_policy() {
    // (case, providers, best-effort, restricted, single-numa-node); each
    // result is the merged hint and whether the pod is admitted.
    type Case<'a> = (
        &'a str,
        Vec<ProviderHints>,
        (&'a str, bool),
        (&'a str, bool),
        (&'a str, bool),
    );
    let cases: Vec<Case> = vec![
        (
            "two providers, same single node",
            vec![
                provider(&[("r1", Some(&["0"]))]),
                provider(&[("r2", Some(&["0"]))]),
            ],
            ("0", true),
            ("0", true),
            ("0", true),
        ),
        (
            "one provider without hints",
            vec![ProviderHints::new(), provider(&[("r", Some(&["1"]))])],
            ("1", true),
            ("1", true),
            ("1", true),
        ),
        (
            "the narrowest common node wins",
            vec![
                provider(&[("r1", Some(&["0", "1"]))]),
                provider(&[("r2", Some(&["01"]))]),
            ],
            ("0", true),
            ("0", true),
            ("nil!", false),
        ),
        (
            "no common node: not preferred",
            vec![
                provider(&[("r1", Some(&["0"]))]),
                provider(&[("r2", Some(&["1"]))]),
            ],
            ("01!", true),
            ("01!", false),
            ("nil!", false),
        ),
        (
            "only a spanning hint that is preferred",
            vec![provider(&[("r", Some(&["01"]))])],
            ("01", true),
            ("01", true),
            ("nil!", false),
        ),
        (
            "a resource without preference",
            vec![provider(&[("r", None)])],
            ("01", true),
            ("01", true),
            ("nil", true),
        ),
        (
            "a resource that fits nowhere",
            vec![provider(&[("r", Some(&[]))])],
            ("01!", true),
            ("01!", false),
            ("nil!", false),
        ),
        (
            "preferred beats narrower",
            vec![
                provider(&[("r1", Some(&["0!", "01"]))]),
                provider(&[("r2", Some(&["0!", "01"]))]),
            ],
            ("01", true),
            ("01", true),
            ("nil!", false),
        ),
        (
            "two resources of one provider",
            vec![provider(&[("r1", Some(&["0", "1"])), ("r2", Some(&["1"]))])],
            ("1", true),
            ("1", true),
            ("1", true),
        ),
    ];
    for (name, providers, best_effort, restricted, single) in cases {
        for (kind, want) in [
            (PolicyKind::BestEffort, best_effort),
            (PolicyKind::Restricted, restricted),
            (PolicyKind::SingleNumaNode, single),
        ] {
            let policy = policy::Policy {
                kind,
                numa_nodes: vec![0, 1],
            };
            let (hint, admit) = policy.merge(&providers);
            let got = fmt(hint);
            assert_eq!((got.as_str(), admit), want, "{name} / {}", kind.name());
        }
    }
    let none = policy::Policy {
        kind: PolicyKind::None,
        numa_nodes: vec![0, 1],
    };
    assert_eq!(
        none.merge(&[provider(&[("r", Some(&[]))])]),
        (TopologyHint::default(), true)
    );
}

/// A provider with fixed hints that records what it was asked.
struct Fake {
    container_hints: ProviderHints,
    pod_hints: ProviderHints,
    calls: Mutex<Vec<String>>,
    refuse: bool,
}

impl Fake {
    fn new(hints: ProviderHints) -> Arc<Fake> {
        Arc::new(Fake {
            container_hints: hints.clone(),
            pod_hints: hints,
            calls: Mutex::new(Vec::new()),
            refuse: false,
        })
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

impl HintProvider for Fake {
    fn topology_hints(&self, _: &Pod, c: &Container) -> ProviderHints {
        self.calls.lock().unwrap().push(format!("hints {}", c.name));
        self.container_hints.clone()
    }
    fn pod_topology_hints(&self, _: &Pod) -> ProviderHints {
        self.calls.lock().unwrap().push("pod hints".into());
        self.pod_hints.clone()
    }
    fn allocate(&self, _: &Pod, c: &Container) -> Result<(), AllocationError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("allocate {}", c.name));
        if self.refuse {
            return Err(crate::cm::cpumanager::CpuManagerError::NotEnoughCpus.into());
        }
        Ok(())
    }
}

fn pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "uid": "u"},
        "spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "a"}, {"name": "b"}]}
    }))
    .unwrap()
}

fn manager(policy: &str, scope: &str, providers: Vec<Arc<dyn HintProvider>>) -> TopologyManager {
    let config = TopologyManagerConfig {
        policy: policy.into(),
        scope: scope.into(),
    };
    TopologyManager::new(&config, &[0, 1], Default::default(), providers).unwrap()
}

#[test]
fn scopes_ask_allocate_and_record_in_go_order() {
    let one = || provider(&[("r", Some(&["1"]))]);
    // Container scope: hints then allocation, container by container.
    let f = Fake::new(one());
    let m = manager("restricted", "container", vec![f.clone()]);
    m.admit(&pod()).unwrap();
    assert_eq!(
        f.calls(),
        [
            "hints i",
            "allocate i",
            "hints a",
            "allocate a",
            "hints b",
            "allocate b"
        ]
    );
    assert_eq!(m.store().get_affinity("u", "a"), h("1"));
    // Pod scope: one merge for the pod, the same affinity for each container.
    let f = Fake::new(one());
    let m = manager("single-numa-node", "pod", vec![f.clone()]);
    m.admit(&pod()).unwrap();
    assert_eq!(
        f.calls(),
        ["pod hints", "allocate i", "allocate a", "allocate b"]
    );
    assert_eq!(m.store().get_affinity("u", "b"), h("1"));
    // The none policy only allocates.
    let f = Fake::new(one());
    let m = manager("none", "container", vec![f.clone()]);
    m.admit(&pod()).unwrap();
    assert_eq!(f.calls(), ["allocate i", "allocate a", "allocate b"]);
    assert_eq!(m.store().get_affinity("u", "a"), TopologyHint::default());
}

#[test]
fn unalignable_pods_are_refused_before_any_allocation() {
    let f = Fake::new(provider(&[("r", Some(&["01"]))]));
    let m = manager("single-numa-node", "container", vec![f.clone()]);
    let err = m.admit(&pod()).unwrap_err();
    assert_eq!(err.admission_reason(), "TopologyAffinityError");
    assert_eq!(
        err.admission_message(),
        "Resources cannot be allocated with Topology locality"
    );
    assert_eq!(f.calls(), ["hints i"]);
    // A provider's refusal is the pod's reason.
    let f = Arc::new(Fake {
        refuse: true,
        ..Arc::into_inner(Fake::new(ProviderHints::new())).unwrap()
    });
    let m = manager("best-effort", "container", vec![f.clone()]);
    let err = m.admit(&pod()).unwrap_err();
    assert_eq!(err.admission_reason(), "UnexpectedAdmissionError");
    assert_eq!(f.calls(), ["hints i", "allocate i"]);
}

#[test]
fn construction_errors_and_container_lifetimes() {
    let config = |p: &str, s: &str| TopologyManagerConfig {
        policy: p.into(),
        scope: s.into(),
    };
    let nine: Vec<u32> = (0..9).collect();
    let cases = [
        (
            config("bogus", "container"),
            vec![0],
            "unknown policy: \"bogus\"",
        ),
        (
            config("restricted", "node"),
            vec![0],
            "unknown scope: \"node\"",
        ),
        (
            config("single-numa-node", "container"),
            nine.clone(),
            "unsupported on machines with more than 8 NUMA Nodes",
        ),
    ];
    for (c, nodes, want) in cases {
        let err = TopologyManager::new(&c, &nodes, Default::default(), Vec::new()).unwrap_err();
        assert_eq!(err.to_string(), want);
    }
    TopologyManager::new(
        &config("none", "container"),
        &nine,
        Default::default(),
        Vec::new(),
    )
    .unwrap();

    let m = manager(
        "best-effort",
        "container",
        vec![Fake::new(provider(&[("r", Some(&["0"]))]))],
    );
    let p = pod();
    m.admit(&p).unwrap();
    let a = p.spec.as_ref().unwrap().containers[0].clone();
    m.add_container(&p, &a, "id1");
    m.add_container(&p, &a, "id2");
    m.remove_container("id1");
    assert_eq!(
        m.store().get_affinity("u", "a"),
        h("0"),
        "id2 still runs it"
    );
    m.remove_container("id2");
    assert_eq!(m.store().get_affinity("u", "a"), TopologyHint::default());
    m.remove_container("unknown");
}
