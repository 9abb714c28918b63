//! The two-way patch against apimachinery's own cases (the `TwoWay` column
//! of its strategic patch tests, over its `MergeItem` struct) and the Node
//! status patches the real API server refused.

use serde_json::{Value, json};

use super::{DiffError, PatchSchema, create_two_way_merge_patch};

fn merge_item() -> PatchSchema {
    PatchSchema::of("MergeItem")
}

#[test]
fn two_way_table() {
    // (what, original, modified, want)
    let cases = [
        (
            "scalars deleted from a merged int list",
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"mergingIntList": [1, 2]}),
            json!({"$setElementOrder/mergingIntList": [1, 2], "$deleteFromPrimitiveList/mergingIntList": [3]}),
        ),
        (
            "duplicates deleted once",
            json!({"mergingIntList": [1, 2, 3, 3]}),
            json!({"mergingIntList": [1, 2]}),
            json!({"$setElementOrder/mergingIntList": [1, 2], "$deleteFromPrimitiveList/mergingIntList": [3]}),
        ),
        (
            "maps added before and after: changes in the modified order",
            json!({"mergingList": [{"name": 1}, {"name": 2, "value": 2}]}),
            json!({"mergingList": [{"name": 4, "value": 4}, {"name": 1}, {"name": 2, "value": 2}, {"name": 3, "value": 3}]}),
            json!({
                "$setElementOrder/mergingList": [{"name": 4}, {"name": 1}, {"name": 2}, {"name": 3}],
                "mergingList": [{"name": 4, "value": 4}, {"name": 3, "value": 3}]
            }),
        ),
        (
            "a field added to one element",
            json!({"mergingList": [{"name": 1}, {"name": 2, "value": 2}]}),
            json!({"mergingList": [{"name": 1, "value": 1}, {"name": 2, "value": 2}]}),
            json!({
                "$setElementOrder/mergingList": [{"name": 1}, {"name": 2}],
                "mergingList": [{"name": 1, "value": 1}]
            }),
        ),
        (
            "an element deleted: the deletion last",
            json!({"mergingList": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}),
            json!({"mergingList": [{"name": "c", "value": 1}, {"name": "a"}]}),
            json!({
                "$setElementOrder/mergingList": [{"name": "c"}, {"name": "a"}],
                "mergingList": [{"name": "c", "value": 1}, {"$patch": "delete", "name": "b"}]
            }),
        ),
        (
            "every element deleted: no empty order list",
            json!({"mergingList": [{"name": "a"}]}),
            json!({"mergingList": []}),
            json!({"mergingList": [{"$patch": "delete", "name": "a"}]}),
        ),
        (
            "only the order changed",
            json!({"mergingList": [{"name": "a"}, {"name": "b"}]}),
            json!({"mergingList": [{"name": "b"}, {"name": "a"}]}),
            json!({"$setElementOrder/mergingList": [{"name": "b"}, {"name": "a"}]}),
        ),
        (
            "a list that was empty is sent whole",
            json!({"mergingList": []}),
            json!({"mergingList": [{"name": "b"}, {"name": "a"}]}),
            json!({"mergingList": [{"name": "b"}, {"name": "a"}]}),
        ),
        (
            "an atomic list replaced, a removed field nulled, a changed type replaced",
            json!({"other": [1, 2], "gone": "x", "typed": "1"}),
            json!({"other": [2, 1], "typed": 1}),
            json!({"other": [2, 1], "gone": null, "typed": 1}),
        ),
        (
            "nothing changed",
            json!({"mergingList": [{"name": "a", "v": {"x": 1}}], "m": {"k": "v"}}),
            json!({"mergingList": [{"name": "a", "v": {"x": 1}}], "m": {"k": "v"}}),
            json!({}),
        ),
    ];
    for (what, original, modified, want) in cases {
        let got = create_two_way_merge_patch(&original, &modified, merge_item()).unwrap();
        assert_eq!(got, want, "{what}");
    }
}

fn condition(t: &str, status: &str, beat: &str) -> Value {
    json!({"type": t, "status": status, "lastHeartbeatTime": beat, "lastTransitionTime": "2024-01-01T00:00:00Z"})
}

/// The heartbeat the real API server refused ("The order in patch list …
/// doesn't match $setElementOrder list"): every condition's heartbeat moved,
/// so every condition is in the list, in the Node's own order.
#[test]
fn node_heartbeat_lists_conditions_in_the_nodes_order() {
    let types = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"];
    let t0 = "2024-01-01T00:00:00Z";
    let t1 = "2024-01-01T00:05:00Z";
    let original = json!({"status": {"conditions": types.iter().map(|t| condition(t, "False", t0)).collect::<Vec<_>>()}});
    let modified = json!({"status": {"conditions": types.iter().map(|t| condition(t, "False", t1)).collect::<Vec<_>>()}});
    let patch = create_two_way_merge_patch(&original, &modified, PatchSchema::NODE).unwrap();
    let listed: Vec<&str> = patch["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(listed, types);
    let order: Vec<&str> = patch["status"]["$setElementOrder/conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(order, types);
    assert_eq!(
        patch["status"]["conditions"][0],
        json!({"type": "MemoryPressure", "lastHeartbeatTime": t1})
    );
}

#[test]
fn node_lists_table() {
    let cases = [
        (
            "images and volumesInUse are atomic",
            json!({"status": {"images": [{"names": ["a"]}], "volumesInUse": ["x"]}}),
            json!({"status": {"images": [{"names": ["b"]}, {"names": ["a"]}], "volumesInUse": ["x", "y"]}}),
            json!({"status": {"images": [{"names": ["b"]}, {"names": ["a"]}], "volumesInUse": ["x", "y"]}}),
        ),
        (
            "a condition another writer added stays out of the patch only when kept",
            json!({"status": {"conditions": [{"type": "NetworkUnavailable", "status": "False"}, {"type": "Ready", "status": "False"}]}}),
            json!({"status": {"conditions": [{"type": "NetworkUnavailable", "status": "False"}, {"type": "Ready", "status": "True"}]}}),
            json!({"status": {
                "$setElementOrder/conditions": [{"type": "NetworkUnavailable"}, {"type": "Ready"}],
                "conditions": [{"type": "Ready", "status": "True"}]
            }}),
        ),
        (
            "podCIDRs merge as scalars",
            json!({"spec": {"podCIDRs": ["10.0.0.0/24"]}}),
            json!({"spec": {"podCIDRs": ["10.0.0.0/24", "fd00::/64"]}}),
            json!({"spec": {"$setElementOrder/podCIDRs": ["10.0.0.0/24", "fd00::/64"], "podCIDRs": ["fd00::/64"]}}),
        ),
    ];
    for (what, original, modified, want) in cases {
        let got = create_two_way_merge_patch(&original, &modified, PatchSchema::NODE).unwrap();
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn retain_keys_on_pod_volumes() {
    let original = json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}});
    let modified = json!({"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/x"}}]}});
    let got = create_two_way_merge_patch(&original, &modified, PatchSchema::POD).unwrap();
    assert_eq!(
        got,
        json!({"spec": {
            "$setElementOrder/volumes": [{"name": "v"}],
            "volumes": [{"$retainKeys": ["hostPath", "name"], "emptyDir": null, "hostPath": {"path": "/x"}, "name": "v"}]
        }})
    );
}

#[test]
fn errors_table() {
    let cases = [
        (
            json!({"mergingList": [{"name": "a"}]}),
            json!({"mergingList": [{"value": 1}]}),
            "does not contain declared merge key",
        ),
        (
            json!({"mergingList": [[1]]}),
            json!({"mergingList": [[2]]}),
            "lists of lists",
        ),
        (
            json!({"mergingIntList": [1]}),
            json!({"mergingIntList": ["a"]}),
            "not identical",
        ),
    ];
    for (original, modified, want) in cases {
        let err = create_two_way_merge_patch(&original, &modified, merge_item()).unwrap_err();
        assert!(err.to_string().contains(want), "{err}");
    }
    assert_eq!(
        create_two_way_merge_patch(&json!([]), &json!({}), merge_item()),
        Err(DiffError::NotAnObject {
            which: "the original"
        })
    );
}
