//! Admission tables: sysctls, general predicates, OS checks, preemption.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, Pod, PodSecurityContext, PodSpec, ResourceRequirements, Sysctl,
    Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use super::admission::{Admission, PodAdmitResult, PreemptFn, SoftAdmission, SysctlAllowlist};
use super::fit::AdmissionNode;
use crate::kubelet::types::CONFIG_SOURCE_ANNOTATION_KEY;
use crate::util::quantity::Quantity;

fn node() -> AdmissionNode {
    AdmissionNode {
        name: "node".into(),
        labels: [("disk".to_string(), "ssd".to_string())].into(),
        taints: vec![Taint {
            key: "dedicated".into(),
            value: Some("db".into()),
            effect: "NoExecute".into(),
            ..Default::default()
        }],
        allocatable: [
            ("pods".to_string(), Quantity::from_decimal(110)),
            ("cpu".to_string(), Quantity::from_decimal(2)),
            ("memory".to_string(), Quantity::from_binary(1 << 30)),
        ]
        .into(),
    }
}

fn pod(uid: &str, cpu: &str) -> Pod {
    let mut p = Pod::default();
    p.metadata.uid = Some(uid.into());
    p.metadata.name = Some(uid.into());
    p.metadata.namespace = Some("default".into());
    p.metadata.annotations =
        Some([(CONFIG_SOURCE_ANNOTATION_KEY.to_string(), "api".to_string())].into());
    let requests: BTreeMap<String, ApiQuantity> = if cpu.is_empty() {
        BTreeMap::new()
    } else {
        [("cpu".to_string(), ApiQuantity(cpu.into()))].into()
    };
    p.spec = Some(PodSpec {
        containers: vec![Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: Some(requests.clone()),
                limits: Some(requests),
                ..Default::default()
            }),
            ..Default::default()
        }],
        tolerations: Some(vec![Toleration {
            key: Some("dedicated".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    p
}

fn admission(preempt: Option<PreemptFn>) -> Admission {
    Admission {
        resources: None,
        eviction: None,
        node: Arc::new(node),
        sysctls: SysctlAllowlist::new(&[
            "kernel.msg*".to_string(),
            "net.core.somaxconn".to_string(),
        ]),
        preempt,
        shutdown: None,
    }
}

fn verdict(r: PodAdmitResult) -> (bool, String, String) {
    (r.admit, r.reason, r.message)
}

#[tokio::test]
async fn admission_table() {
    let a = admission(None);
    let existing = vec![Arc::new(pod("running", "1500m"))];
    type Edit = Box<dyn Fn(&mut Pod)>;
    let cases: Vec<(&str, Edit, (bool, &str, &str))> = vec![
        ("fits", Box::new(|_p: &mut Pod| {}), (true, "", "")),
        (
            "too much cpu",
            Box::new(|p: &mut Pod| *p = pod("new", "1")),
            (
                false,
                "OutOfcpu",
                "Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000",
            ),
        ),
        (
            "node selector",
            Box::new(|p: &mut Pod| {
                p.spec.as_mut().unwrap().node_selector =
                    Some([("disk".to_string(), "hdd".to_string())].into())
            }),
            (false, "NodeAffinity", "Predicate NodeAffinity failed"),
        ),
        (
            "other node",
            Box::new(|p: &mut Pod| p.spec.as_mut().unwrap().node_name = Some("elsewhere".into())),
            (false, "NodeName", "Predicate NodeName failed"),
        ),
        (
            "untolerated taint",
            Box::new(|p: &mut Pod| p.spec.as_mut().unwrap().tolerations = None),
            (false, "TaintToleration", "Predicate TaintToleration failed"),
        ),
        (
            "unsafe sysctl",
            Box::new(|p: &mut Pod| {
                p.spec.as_mut().unwrap().security_context = Some(PodSecurityContext {
                    sysctls: Some(vec![Sysctl {
                        name: "kernel.panic".into(),
                        value: "1".into(),
                    }]),
                    ..Default::default()
                })
            }),
            (
                false,
                "SysctlForbidden",
                "forbidden sysctl: \"kernel.panic\" not allowlisted",
            ),
        ),
        (
            "allowed sysctl prefix, host ipc",
            Box::new(|p: &mut Pod| {
                let spec = p.spec.as_mut().unwrap();
                spec.host_ipc = Some(true);
                spec.security_context = Some(PodSecurityContext {
                    sysctls: Some(vec![Sysctl {
                        name: "kernel.msgmax".into(),
                        value: "1".into(),
                    }]),
                    ..Default::default()
                })
            }),
            (
                false,
                "SysctlForbidden",
                "forbidden sysctl: \"kernel.msgmax\" not allowed with host ipc enabled",
            ),
        ),
        (
            "pod OS label",
            Box::new(|p: &mut Pod| {
                p.metadata.labels =
                    Some([("kubernetes.io/os".to_string(), "windows".to_string())].into())
            }),
            (
                false,
                "PodOSSelectorNodeLabelDoesNotMatch",
                "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
            ),
        ),
    ];
    for (name, edit, want) in cases {
        let mut p = pod("new", "");
        edit(&mut p);
        let got = verdict(a.can_admit_pod(&existing, &p).await);
        assert_eq!(
            got,
            (want.0, want.1.to_string(), want.2.to_string()),
            "{name}"
        );
    }
}

#[tokio::test]
async fn host_ports_conflict() {
    let a = admission(None);
    let with_port = |uid: &str, ip: Option<&str>| {
        let mut p = pod(uid, "");
        p.spec.as_mut().unwrap().containers[0].ports = Some(vec![ContainerPort {
            container_port: 80,
            host_port: Some(8080),
            host_ip: ip.map(str::to_string),
            ..Default::default()
        }]);
        p
    };
    let existing = vec![Arc::new(with_port("a", Some("10.0.0.1")))];
    let r = a.can_admit_pod(&existing, &with_port("b", None)).await;
    assert_eq!((r.admit, r.reason.as_str()), (false, "NodePorts"));
    let r = a
        .can_admit_pod(&existing, &with_port("c", Some("10.0.0.2")))
        .await;
    assert!(r.admit, "different host IPs do not conflict");
}

#[tokio::test]
async fn critical_pods_preempt_lower_qos_pods_for_resources() {
    let evicted = Arc::new(Mutex::new(Vec::new()));
    let e = evicted.clone();
    let preempt: PreemptFn = Arc::new(move |p: Arc<Pod>| {
        e.lock().unwrap().push(p.metadata.uid.clone().unwrap());
        Box::pin(async { Ok(()) })
    });
    let a = admission(Some(preempt));
    let mut besteffort = pod("be", "");
    besteffort.spec.as_mut().unwrap().containers[0].resources = None;
    let guaranteed = pod("g", "1500m");
    let existing = vec![Arc::new(besteffort), Arc::new(guaranteed)];
    let mut critical = pod("crit", "1");
    critical.metadata.annotations =
        Some([(CONFIG_SOURCE_ANNOTATION_KEY.to_string(), "file".to_string())].into());
    let r = a.can_admit_pod(&existing, &critical).await;
    assert!(r.admit, "{r:?}");
    assert_eq!(
        *evicted.lock().unwrap(),
        vec!["g"],
        "the best-effort pod frees no cpu; the guaranteed one does"
    );
}

#[test]
fn apparmor_soft_admission() {
    let mut p = pod("a", "");
    assert!(SoftAdmission::with_apparmor(false).can_run_pod(&p).admit);
    p.metadata.annotations.as_mut().unwrap().insert(
        "container.apparmor.security.beta.kubernetes.io/c".into(),
        "unconfined".into(),
    );
    assert!(SoftAdmission::with_apparmor(false).can_run_pod(&p).admit);
    p.metadata.annotations.as_mut().unwrap().insert(
        "container.apparmor.security.beta.kubernetes.io/c".into(),
        "runtime/default".into(),
    );
    let r = SoftAdmission::with_apparmor(false).can_run_pod(&p);
    assert_eq!((r.admit, r.reason.as_str()), (false, "AppArmor"));
    assert!(SoftAdmission::with_apparmor(true).can_run_pod(&p).admit);
}

#[tokio::test]
async fn the_eviction_handler_runs_first() {
    let mut a = admission(None);
    a.eviction = Some(Arc::new(|_pod: &Pod| {
        PodAdmitResult::reject("Evicted", "The node had condition: [MemoryPressure]. ")
    }));
    // A pod every other handler would refuse too: eviction's answer wins.
    let r = a.can_admit_pod(&[], &pod("big", "100")).await;
    assert_eq!(
        verdict(r),
        (
            false,
            "Evicted".to_string(),
            "The node had condition: [MemoryPressure]. ".to_string()
        )
    );
    a.eviction = Some(Arc::new(|_pod: &Pod| PodAdmitResult::admit()));
    assert!(a.can_admit_pod(&[], &pod("small", "1m")).await.admit);
}

#[tokio::test]
async fn the_shutdown_handler_runs_last() {
    let mut a = admission(None);
    let shutting_down = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flag = shutting_down.clone();
    a.shutdown = Some(Arc::new(move |_pod: &Pod| {
        if flag.load(std::sync::atomic::Ordering::SeqCst) {
            PodAdmitResult::reject(
                "NodeShutdown",
                "Pod was rejected as the node is shutting down.",
            )
        } else {
            PodAdmitResult::admit()
        }
    }));
    // A pod the predicates refuse keeps their reason.
    let r = a.can_admit_pod(&[], &pod("big", "100")).await;
    assert_eq!(r.reason, "OutOfcpu");
    let r = a.can_admit_pod(&[], &pod("small", "1m")).await;
    assert_eq!(
        verdict(r),
        (
            false,
            "NodeShutdown".to_string(),
            "Pod was rejected as the node is shutting down.".to_string()
        )
    );
    shutting_down.store(false, std::sync::atomic::Ordering::SeqCst);
    assert!(a.can_admit_pod(&[], &pod("small", "1m")).await.admit);
}

#[tokio::test]
async fn resource_allocation_runs_before_the_predicates() {
    use crate::cm::cpumanager::CpuManagerError;
    use crate::kubelet::sync_loop::testing::FakeCm;
    let mut a = admission(None);
    let cm = FakeCm {
        refuse_allocation: Some(|| CpuManagerError::NotEnoughCpus.into()),
        ..Default::default()
    };
    a.resources = Some(super::admission::resource_allocation_admit(Arc::new(cm)));
    // A pod the predicates would refuse: the allocator answers first.
    let r = a.can_admit_pod(&[], &pod("big", "100")).await;
    assert_eq!(
        verdict(r),
        (
            false,
            "UnexpectedAdmissionError".to_string(),
            "Allocate failed due to not enough cpus available to satisfy request, which is unexpected".to_string()
        )
    );
    let cm = FakeCm {
        refuse_allocation: Some(|| {
            CpuManagerError::SmtAlignment {
                requested: 3,
                cpus_per_core: 2,
            }
            .into()
        }),
        ..Default::default()
    };
    a.resources = Some(super::admission::resource_allocation_admit(Arc::new(cm)));
    let r = a.can_admit_pod(&[], &pod("small", "1m")).await;
    assert_eq!(
        verdict(r),
        (
            false,
            "SMTAlignmentError".to_string(),
            "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2".to_string()
        )
    );
    let cm = FakeCm {
        refuse_allocation: Some(|| crate::cm::admission::AllocationError::TopologyAffinity),
        ..Default::default()
    };
    a.resources = Some(super::admission::resource_allocation_admit(Arc::new(cm)));
    let r = a.can_admit_pod(&[], &pod("small", "1m")).await;
    assert_eq!(
        verdict(r),
        (
            false,
            "TopologyAffinityError".to_string(),
            "Resources cannot be allocated with Topology locality".to_string()
        )
    );
    a.resources = Some(super::admission::resource_allocation_admit(Arc::new(
        FakeCm::default(),
    )));
    assert!(a.can_admit_pod(&[], &pod("small", "1m")).await.admit);
}
