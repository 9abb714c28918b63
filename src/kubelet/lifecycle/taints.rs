//! Taints and tolerations (the API's ToleratesTaint and component-helpers'
//! FindMatchingUntoleratedTaint).

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Whether one toleration tolerates a taint: an empty effect matches every
/// effect, an empty key (with Exists) every key; Exists matches any value,
/// Equal (or empty) the same value.
pub fn toleration_tolerates_taint(t: &Toleration, taint: &Taint) -> bool {
    let effect = t.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = t.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        "Exists" => true,
        _ => false,
    }
}

/// The first taint selected by `filter` that no toleration tolerates.
pub fn find_matching_untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    filter: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    taints.iter().filter(|t| filter(t)).find(|taint| {
        !tolerations
            .iter()
            .any(|t| toleration_tolerates_taint(t, taint))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn taint(v: serde_json::Value) -> Taint {
        serde_json::from_value(v).unwrap()
    }

    fn tol(v: serde_json::Value) -> Toleration {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn toleration_table() {
        let t = taint(json!({"key": "dedicated", "value": "gpu", "effect": "NoExecute"}));
        let cases = [
            (
                json!({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoExecute"}),
                true,
            ),
            (json!({"key": "dedicated", "value": "gpu"}), true),
            (json!({"key": "dedicated", "value": "cpu"}), false),
            (json!({"key": "dedicated", "operator": "Exists"}), true),
            (json!({"operator": "Exists"}), true),
            (json!({"operator": "Exists", "effect": "NoSchedule"}), false),
            (json!({"key": "other", "operator": "Exists"}), false),
            (
                json!({"key": "dedicated", "operator": "Lt", "value": "gpu"}),
                false,
            ),
        ];
        for (t_json, want) in cases {
            assert_eq!(
                toleration_tolerates_taint(&tol(t_json.clone()), &t),
                want,
                "{t_json}"
            );
        }
    }

    #[test]
    fn first_untolerated_taint_of_the_filtered_ones() {
        let taints = vec![
            taint(json!({"key": "a", "effect": "NoSchedule"})),
            taint(json!({"key": "b", "effect": "NoExecute"})),
            taint(json!({"key": "c", "effect": "NoExecute"})),
        ];
        let tolerations = vec![tol(json!({"key": "b", "operator": "Exists"}))];
        let no_execute = |t: &Taint| t.effect == "NoExecute";
        let got = find_matching_untolerated_taint(&taints, &tolerations, no_execute);
        assert_eq!(got.map(|t| t.key.as_str()), Some("c"));
        let all = vec![tol(json!({"operator": "Exists"}))];
        assert!(find_matching_untolerated_taint(&taints, &all, no_execute).is_none());
    }
}
