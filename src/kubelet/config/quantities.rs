//! Resource quantities in a pod manifest as the API machinery decodes them:
//! a bare number is a quantity too (`cpu: 1`), every quantity takes its
//! canonical spelling (`1000m` → `1`, `0.5` → `500m`), container and overhead
//! resource lists round up to millis (`0.0001` → `1m`), and a malformed
//! quantity makes the manifest undecodable.

use serde_json::Value;

use crate::util::quantity::{self, Quantity};

/// A quantity that does not parse, with its field path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {source}")]
pub struct BadQuantity {
    pub path: String,
    #[source]
    pub source: quantity::QuantityError,
}

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// Normalizes every quantity of a pod object held as JSON.
pub fn normalize_pod_quantities(pod: &mut Value) -> Result<(), BadQuantity> {
    let Some(spec) = pod.get_mut("spec") else {
        return Ok(());
    };
    for list in CONTAINER_LISTS {
        let Some(Value::Array(containers)) = spec.get_mut(list) else {
            continue;
        };
        for (i, c) in containers.iter_mut().enumerate() {
            let base = format!("spec.{list}[{i}]");
            if let Some(resources) = c.get_mut("resources") {
                resource_lists(resources, &format!("{base}.resources"))?;
            }
            if let Some(Value::Array(env)) = c.get_mut("env") {
                for (j, e) in env.iter_mut().enumerate() {
                    if let Some(divisor) = e.pointer_mut("/valueFrom/resourceFieldRef/divisor") {
                        let path = format!("{base}.env[{j}].valueFrom.resourceFieldRef.divisor");
                        one(divisor, &path, false)?;
                    }
                }
            }
        }
    }
    if let Some(overhead) = spec.get_mut("overhead") {
        resource_list(overhead, "spec.overhead")?;
    }
    if let Some(Value::Array(volumes)) = spec.get_mut("volumes") {
        for (i, v) in volumes.iter_mut().enumerate() {
            let base = format!("spec.volumes[{i}]");
            if let Some(limit) = v.pointer_mut("/emptyDir/sizeLimit") {
                one(limit, &format!("{base}.emptyDir.sizeLimit"), false)?;
            }
            if let Some(items) = v.pointer_mut("/downwardAPI/items") {
                divisors(items, &format!("{base}.downwardAPI.items"))?;
            }
            if let Some(Value::Array(sources)) = v.pointer_mut("/projected/sources") {
                for (j, s) in sources.iter_mut().enumerate() {
                    if let Some(items) = s.pointer_mut("/downwardAPI/items") {
                        divisors(
                            items,
                            &format!("{base}.projected.sources[{j}].downwardAPI.items"),
                        )?;
                    }
                }
            }
            if let Some(resources) = v.pointer_mut("/ephemeral/volumeClaimTemplate/spec/resources")
            {
                let path = format!("{base}.ephemeral.volumeClaimTemplate.spec.resources");
                resource_lists(resources, &path)?;
            }
        }
    }
    Ok(())
}

fn divisors(items: &mut Value, base: &str) -> Result<(), BadQuantity> {
    if let Value::Array(items) = items {
        for (k, item) in items.iter_mut().enumerate() {
            if let Some(divisor) = item.pointer_mut("/resourceFieldRef/divisor") {
                one(
                    divisor,
                    &format!("{base}[{k}].resourceFieldRef.divisor"),
                    false,
                )?;
            }
        }
    }
    Ok(())
}

fn resource_lists(resources: &mut Value, base: &str) -> Result<(), BadQuantity> {
    for key in ["limits", "requests"] {
        if let Some(list) = resources.get_mut(key) {
            resource_list(list, &format!("{base}.{key}"))?;
        }
    }
    Ok(())
}

fn resource_list(list: &mut Value, base: &str) -> Result<(), BadQuantity> {
    if let Value::Object(map) = list {
        for (name, value) in map.iter_mut() {
            one(value, &format!("{base}.{name}"), true)?;
        }
    }
    Ok(())
}

/// Canonicalizes one quantity in place; `round_to_milli` for resource lists.
fn one(value: &mut Value, path: &str, round_to_milli: bool) -> Result<(), BadQuantity> {
    let text = match &*value {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => return Ok(()),
        other => other.to_string(),
    };
    let bad = |source| BadQuantity {
        path: path.to_string(),
        source,
    };
    let mut q = quantity::parse(&text).map_err(bad)?;
    if round_to_milli {
        q = round_up_to_milli(q);
    }
    *value = Value::String(q.to_canonical_string());
    Ok(())
}

/// Rounds a quantity finer than a thousandth up to the next thousandth.
pub fn round_up_to_milli(q: Quantity) -> Quantity {
    let milli = q.milli_value();
    if milli == i64::MAX || milli == i64::MIN {
        return q;
    }
    let rounded = Quantity::from_milli(milli);
    if rounded == q { q } else { rounded }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_are_canonical_and_rounded() {
        let mut pod = json!({"spec": {
            "containers": [{
                "resources": {"limits": {"cpu": 1, "memory": "1024Mi"},
                              "requests": {"cpu": "0.0001", "memory": 0.5}},
                "env": [{"valueFrom": {"resourceFieldRef": {"divisor": "1000m"}}}]
            }],
            "initContainers": [{"resources": {"requests": {"cpu": "1500m"}}}],
            "overhead": {"cpu": "0.25"},
            "volumes": [
                {"emptyDir": {"sizeLimit": "1Gi"}},
                {"downwardAPI": {"items": [{"resourceFieldRef": {"divisor": "1Mi"}}]}},
                {"projected": {"sources": [{"downwardAPI": {"items": [{"resourceFieldRef": {"divisor": 2}}]}}]}}
            ]
        }});
        normalize_pod_quantities(&mut pod).unwrap();
        let spec = &pod["spec"];
        let c = &spec["containers"][0];
        assert_eq!(
            c["resources"]["limits"],
            json!({"cpu": "1", "memory": "1Gi"})
        );
        assert_eq!(
            c["resources"]["requests"],
            json!({"cpu": "1m", "memory": "500m"})
        );
        assert_eq!(c["env"][0]["valueFrom"]["resourceFieldRef"]["divisor"], "1");
        assert_eq!(
            spec["initContainers"][0]["resources"]["requests"]["cpu"],
            "1500m"
        );
        assert_eq!(spec["overhead"]["cpu"], "250m");
        assert_eq!(spec["volumes"][0]["emptyDir"]["sizeLimit"], "1Gi");
        assert_eq!(
            spec["volumes"][1]["downwardAPI"]["items"][0]["resourceFieldRef"]["divisor"],
            "1Mi"
        );
        assert_eq!(
            spec["volumes"][2]["projected"]["sources"][0]["downwardAPI"]["items"][0]["resourceFieldRef"]
                ["divisor"],
            "2"
        );
    }

    #[test]
    fn a_malformed_quantity_names_its_field() {
        let mut pod = json!({"spec": {"containers": [{"resources": {"limits": {"cpu": "lots"}}}]}});
        let err = normalize_pod_quantities(&mut pod).unwrap_err();
        assert_eq!(err.path, "spec.containers[0].resources.limits.cpu");
    }
}
