//! Container and sandbox GC selection, as the Go kubelet's GC tables reason
//! about it.

use super::*;

fn c(id: &str, age_secs: u64) -> GcContainer {
    GcContainer {
        id: id.into(),
        name: String::new(),
        created: SystemTime::UNIX_EPOCH + Duration::from_secs(10_000 - age_secs),
        unknown: false,
    }
}

type UnitSpec<'a> = (&'a str, &'a str, &'a [(&'a str, u64)]);

fn units(spec: &[UnitSpec<'_>]) -> EvictUnits {
    let mut u = EvictUnits::new();
    for (pod, name, containers) in spec {
        u.insert(
            (pod.to_string(), name.to_string()),
            containers.iter().map(|(id, age)| c(id, *age)).collect(),
        );
    }
    u
}

fn policy(per_container: i32, max: i32) -> GcPolicy {
    GcPolicy {
        min_age: Duration::ZERO,
        max_per_pod_container: per_container,
        max_containers: max,
    }
}

fn ids(mut v: Vec<GcContainer>) -> Vec<String> {
    let mut out: Vec<String> = v.drain(..).map(|c| c.id).collect();
    out.sort();
    out
}

#[test]
#[allow(clippy::type_complexity)]
fn container_selection_table() {
    let keep_all = |_: &str| false;
    let deleted = |uid: &str| uid == "gone";
    let cases: Vec<(
        &str,
        EvictUnits,
        GcPolicy,
        bool,
        &dyn Fn(&str) -> bool,
        Vec<&str>,
    )> = vec![
        (
            "no limits: nothing goes",
            units(&[("p", "a", &[("a1", 1), ("a2", 2)])]),
            policy(-1, -1),
            true,
            &keep_all,
            vec![],
        ),
        (
            "per-container limit keeps the newest",
            units(&[("p", "a", &[("a1", 1), ("a3", 3), ("a2", 2)])]),
            policy(1, -1),
            true,
            &keep_all,
            vec!["a2", "a3"],
        ),
        (
            "limit zero removes every dead instance",
            units(&[("p", "a", &[("a1", 1)]), ("p", "b", &[("b1", 1)])]),
            policy(0, -1),
            true,
            &keep_all,
            vec!["a1", "b1"],
        ),
        (
            "removed pods lose everything once sources are ready",
            units(&[
                ("gone", "a", &[("g1", 1), ("g2", 2)]),
                ("p", "a", &[("a1", 1)]),
            ]),
            policy(-1, -1),
            true,
            &deleted,
            vec!["g1", "g2"],
        ),
        (
            "removed pods wait for all sources",
            units(&[("gone", "a", &[("g1", 1), ("g2", 2)])]),
            policy(-1, -1),
            false,
            &deleted,
            vec![],
        ),
        (
            "node limit spreads evenly, then oldest first",
            units(&[
                ("p", "a", &[("a1", 1), ("a2", 20), ("a3", 30)]),
                ("p", "b", &[("b1", 2), ("b2", 25)]),
                ("q", "c", &[("c1", 3)]),
            ]),
            policy(-1, 4),
            true,
            &keep_all,
            // 4 / 3 units = 1 each: a2, a3, b2 go, leaving a1, b1, c1.
            vec!["a2", "a3", "b2"],
        ),
        (
            "node limit below the unit count evicts the oldest survivors",
            units(&[
                ("p", "a", &[("a1", 1)]),
                ("p", "b", &[("b1", 5)]),
                ("q", "c", &[("c1", 3)]),
            ]),
            policy(-1, 2),
            true,
            &keep_all,
            vec!["b1"],
        ),
        (
            "node limit of zero clears everything",
            units(&[("p", "a", &[("a1", 1)]), ("q", "c", &[("c1", 3)])]),
            policy(-1, 0),
            true,
            &keep_all,
            vec!["a1", "c1"],
        ),
    ];
    for (name, u, p, ready, remove, want) in cases {
        let got = ids(select_containers_to_evict(u, &p, ready, remove));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn sandbox_selection_table() {
    let sb = |id: &str, age: u64, active: bool| GcSandbox {
        id: id.into(),
        created: SystemTime::UNIX_EPOCH + Duration::from_secs(10_000 - age),
        active,
    };
    let mut by_pod = HashMap::new();
    by_pod.insert(
        "live".to_string(),
        vec![
            sb("l-old", 30, false),
            sb("l-new", 1, false),
            sb("l-mid", 10, true),
        ],
    );
    by_pod.insert(
        "gone".to_string(),
        vec![sb("g1", 5, false), sb("g2", 6, true)],
    );
    by_pod.insert("single".to_string(), vec![sb("s1", 5, false)]);
    let mut got = select_sandboxes_to_evict(by_pod, &|uid: &str| uid == "gone");
    got.sort();
    // Live pods keep their newest sandbox (and active ones); removed pods
    // lose every inactive one.
    assert_eq!(got, vec!["g1", "l-old"]);
}

#[test]
fn oldest_n_keeps_newest() {
    let (kept, removed) = oldest_n(vec![c("a", 5), c("b", 1), c("c", 9)], 2);
    assert_eq!(ids(kept), vec!["b"]);
    assert_eq!(ids(removed), vec!["a", "c"]);
    let (kept, removed) = oldest_n(vec![c("a", 5)], usize::MAX);
    assert!(kept.is_empty());
    assert_eq!(ids(removed), vec!["a"]);
}
