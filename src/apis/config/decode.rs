//! Typed decoding of a JSON tree with the two things Go's strict decoder
//! reports and serde alone does not: the path of the field that failed
//! (`authentication.webhook.cacheTTL: ...`) and the fields nobody asked for
//! (unknown fields, which the Go kubelet tolerates after a warning).
//!
//! A JSON `null` inside a struct means "absent", as with Go's decoder.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};
use serde::forward_to_deserialize_any;
use serde_json::Value;

/// A decoding failure and where in the document it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Go-style field path, e.g. `logging.options.json.infoBufferSize`
    /// or `registerWithTaints[0].effect`; empty for the document itself.
    pub path: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "field {}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for FieldError {}

impl de::Error for FieldError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        FieldError {
            path: String::new(),
            message: msg.to_string(),
        }
    }
}

impl FieldError {
    fn at(mut self, path: &str) -> Self {
        if self.path.is_empty() {
            self.path = path.to_string();
        }
        self
    }
}

fn located(path: &str, e: serde_json::Error) -> FieldError {
    FieldError {
        path: path.to_string(),
        message: e.to_string(),
    }
}

/// The result of a decode: the value and the fields that were ignored.
pub struct Decoded<T> {
    pub value: T,
    pub unknown_fields: Vec<String>,
}

/// Decodes `value` into `T`, collecting unknown fields instead of failing.
pub fn decode<T: DeserializeOwned>(value: Value) -> Result<Decoded<T>, FieldError> {
    let ignored = Rc::new(RefCell::new(Vec::new()));
    let value = T::deserialize(Tracked {
        value,
        path: String::new(),
        ignored: ignored.clone(),
    })?;
    let unknown_fields = ignored.borrow().clone();
    Ok(Decoded {
        value,
        unknown_fields,
    })
}

struct Tracked {
    value: Value,
    path: String,
    ignored: Rc<RefCell<Vec<String>>>,
}

impl Tracked {
    fn child(&self, value: Value, path: String) -> Tracked {
        Tracked {
            value,
            path,
            ignored: self.ignored.clone(),
        }
    }

    fn map<'de, V: Visitor<'de>>(
        self,
        visitor: V,
        skip_nulls: bool,
    ) -> Result<V::Value, FieldError> {
        let Value::Object(map) = self.value else {
            return Err(<FieldError as de::Error>::custom(
                "internal: expected an object",
            ));
        };
        let parent = Tracked {
            value: Value::Null,
            path: self.path.clone(),
            ignored: self.ignored,
        };
        visitor
            .visit_map(TrackedMap {
                iter: map.into_iter(),
                pending: None,
                parent,
                skip_nulls,
            })
            .map_err(|e| e.at(&self.path))
    }

    fn seq<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        let Value::Array(items) = self.value else {
            return Err(<FieldError as de::Error>::custom(
                "internal: expected an array",
            ));
        };
        let parent = Tracked {
            value: Value::Null,
            path: self.path.clone(),
            ignored: self.ignored,
        };
        visitor
            .visit_seq(TrackedSeq {
                iter: items.into_iter().enumerate(),
                parent,
            })
            .map_err(|e| e.at(&self.path))
    }
}

macro_rules! forward_scalar {
    ($($method:ident),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
                let path = self.path;
                self.value.$method(visitor).map_err(|e| located(&path, e))
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for Tracked {
    type Error = FieldError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        match self.value {
            Value::Object(_) => self.map(visitor, false),
            Value::Array(_) => self.seq(visitor),
            value => {
                let path = self.path;
                value
                    .deserialize_any(visitor)
                    .map_err(|e| located(&path, e))
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, FieldError> {
        match self.value {
            Value::Object(_) => self.map(visitor, true),
            value => {
                let path = self.path;
                value
                    .deserialize_struct(name, fields, visitor)
                    .map_err(|e| located(&path, e))
            }
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        match self.value {
            Value::Object(_) => self.map(visitor, false),
            value => {
                let path = self.path;
                value
                    .deserialize_map(visitor)
                    .map_err(|e| located(&path, e))
            }
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        match self.value {
            Value::Array(_) => self.seq(visitor),
            value => {
                let path = self.path;
                value
                    .deserialize_seq(visitor)
                    .map_err(|e| located(&path, e))
            }
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, FieldError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        self.ignored.borrow_mut().push(self.path);
        visitor.visit_unit()
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, FieldError> {
        let path = self.path;
        self.value
            .deserialize_enum(name, variants, visitor)
            .map_err(|e| located(&path, e))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, FieldError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, FieldError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, FieldError> {
        let path = self.path;
        self.value
            .deserialize_unit_struct(name, visitor)
            .map_err(|e| located(&path, e))
    }

    forward_scalar!(
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_unit,
        deserialize_identifier,
    );
}

struct TrackedMap {
    iter: serde_json::map::IntoIter,
    pending: Option<(String, Value)>,
    parent: Tracked,
    skip_nulls: bool,
}

impl<'de> MapAccess<'de> for TrackedMap {
    type Error = FieldError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, FieldError> {
        for (key, value) in self.iter.by_ref() {
            if self.skip_nulls && value.is_null() {
                continue;
            }
            let k = seed.deserialize(KeyDeserializer(key.clone()))?;
            self.pending = Some((key, value));
            return Ok(Some(k));
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, FieldError> {
        let (key, value) = self.pending.take().ok_or_else(|| {
            <FieldError as de::Error>::custom("internal: value requested before key")
        })?;
        let path = if self.parent.path.is_empty() {
            key
        } else {
            format!("{}.{key}", self.parent.path)
        };
        let child = self.parent.child(value, path.clone());
        seed.deserialize(child).map_err(|e| e.at(&path))
    }
}

struct TrackedSeq {
    iter: std::iter::Enumerate<std::vec::IntoIter<Value>>,
    parent: Tracked,
}

impl<'de> SeqAccess<'de> for TrackedSeq {
    type Error = FieldError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, FieldError> {
        match self.iter.next() {
            Some((i, value)) => {
                let path = format!("{}[{i}]", self.parent.path);
                let child = self.parent.child(value, path.clone());
                seed.deserialize(child).map(Some).map_err(|e| e.at(&path))
            }
            None => Ok(None),
        }
    }
}

/// A mapping key, offered as a string to whatever identifies fields.
struct KeyDeserializer(String);

impl<'de> de::Deserializer<'de> for KeyDeserializer {
    type Error = FieldError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        let inner: de::value::StringDeserializer<FieldError> = self.0.into_deserializer();
        inner.deserialize_any(visitor)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default, rename_all = "camelCase")]
    struct Inner {
        cache_ttl: String,
        enabled: Option<bool>,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default, rename_all = "camelCase")]
    struct Outer {
        port: i32,
        inner: Inner,
        list: Vec<Inner>,
        labels: BTreeMap<String, String>,
    }

    #[test]
    fn unknown_fields_are_collected_with_their_paths() {
        let got = decode::<Outer>(json!({
            "port": 1,
            "bogus": true,
            "inner": {"cacheTTL": "x", "extra": 1},
            "list": [{"enabled": true}, {"nope": 2}],
            "labels": {"free": "form"},
        }))
        .unwrap();
        assert_eq!(got.value.port, 1);
        assert_eq!(
            got.value.labels.get("free").map(String::as_str),
            Some("form")
        );
        assert_eq!(
            got.unknown_fields,
            vec!["bogus", "inner.cacheTTL", "inner.extra", "list[1].nope"]
        );
    }

    #[test]
    fn errors_name_the_deepest_field() {
        let cases = [
            (json!({"port": "x"}), "port"),
            (json!({"inner": {"enabled": "yes"}}), "inner.enabled"),
            (json!({"list": [{}, {"enabled": 3}]}), "list[1].enabled"),
            (json!({"inner": 5}), "inner"),
            (json!({"port": 3000000000u64}), "port"),
        ];
        for (value, path) in cases {
            let err = decode::<Outer>(value.clone()).err().unwrap();
            assert_eq!(err.path, path, "{value}: {err}");
        }
    }

    #[test]
    fn null_in_a_struct_means_absent() {
        let got = decode::<Outer>(json!({"port": null, "inner": {"enabled": null}})).unwrap();
        assert_eq!(got.value, Outer::default());
    }
}
