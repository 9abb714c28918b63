//! resource.Quantity on the wire: a string such as `"1Gi"` (a bare number is
//! accepted as Go accepts it), printed in canonical form.

use std::collections::BTreeMap;

use serde::de::{self, Deserializer, Visitor};
use serde::ser::{SerializeMap, Serializer};

use crate::util::quantity::{self, Quantity};

struct QuantityVisitor;

impl Visitor<'_> for QuantityVisitor {
    type Value = Quantity;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a quantity such as \"100Mi\"")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
        quantity::parse(v).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Quantity, E> {
        self.visit_str(&v.to_string())
    }
}

pub fn serialize<S: Serializer>(q: &Quantity, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&q.to_canonical_string())
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Quantity, D::Error> {
    d.deserialize_any(QuantityVisitor)
}

/// A `ResourceList`-shaped map of quantities.
pub mod map {
    use super::*;

    pub fn serialize<S: Serializer>(
        m: &BTreeMap<String, Quantity>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_map(Some(m.len()))?;
        for (k, v) in m {
            out.serialize_entry(k, &v.to_canonical_string())?;
        }
        out.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, Quantity>, D::Error> {
        struct MapVisitor;
        impl<'de> Visitor<'de> for MapVisitor {
            type Value = BTreeMap<String, Quantity>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of resource names to quantities")
            }

            fn visit_map<A: de::MapAccess<'de>>(
                self,
                mut access: A,
            ) -> Result<Self::Value, A::Error> {
                struct Q(Quantity);
                impl<'de> de::Deserialize<'de> for Q {
                    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                        super::deserialize(d).map(Q)
                    }
                }
                let mut out = BTreeMap::new();
                while let Some((k, Q(v))) = access.next_entry::<String, Q>()? {
                    out.insert(k, v);
                }
                Ok(out)
            }
        }
        d.deserialize_map(MapVisitor)
    }
}
