//! The text go-spew prints for `%#v` with sorted keys (Go's
//! `hashutil.DeepHashObject`), piece by piece, and FNV-32a over it: the
//! checksum the Go kubelet puts into its checkpoint files. Each checkpoint
//! module spells its own struct; maps, slices and the hash live here.

use std::fmt::Display;

/// FNV-32a (the hash behind Go's checkpoint checksums).
pub fn fnv32a(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// A map's entries, keys already in go-spew's order: `map[k:v k:v]`, or
/// `<nil>` for a nil map. Values print without their type, as go-spew
/// prints them inside a map.
pub fn map<K: Display, V>(
    out: &mut String,
    entries: Option<impl IntoIterator<Item = (K, V)>>,
    value: impl Fn(&mut String, V),
) {
    let Some(entries) = entries else {
        out.push_str("<nil>");
        return;
    };
    out.push_str("map[");
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&k.to_string());
        out.push(':');
        value(out, v);
    }
    out.push(']');
}

/// A slice: `[a b c]`, or `<nil>` for a nil slice.
pub fn list<T>(
    out: &mut String,
    items: Option<impl IntoIterator<Item = T>>,
    item: impl Fn(&mut String, T),
) {
    let Some(items) = items else {
        out.push_str("<nil>");
        return;
    };
    out.push('[');
    for (i, x) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        item(out, x);
    }
    out.push(']');
}

/// A slice of values printed as they are (numbers, strings).
pub fn plain_list<T: Display>(out: &mut String, items: Option<impl IntoIterator<Item = T>>) {
    list(out, items, |out, x| out.push_str(&x.to_string()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn maps_lists_and_nils() {
        let m: BTreeMap<&str, Vec<u32>> = [("a", vec![1, 2]), ("b", vec![])].into();
        let mut out = String::new();
        map(&mut out, Some(&m), |o, v| plain_list(o, Some(v)));
        assert_eq!(out, "map[a:[1 2] b:[]]");
        let mut out = String::new();
        map(&mut out, None::<&BTreeMap<&str, u32>>, |_, _| {});
        plain_list(&mut out, None::<Vec<u8>>);
        assert_eq!(out, "<nil><nil>");
        assert_eq!(fnv32a(b""), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c_292c);
    }
}
