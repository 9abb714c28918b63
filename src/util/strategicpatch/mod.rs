//! Strategic merge patches, as apimachinery's `strategicpatch` computes and
//! checks them: the two-way patch from an original to a modified object
//! (with `$setElementOrder` lists, as clients send it), the patch strategies
//! of the served types' fields, and Go's `%v` rendering of JSON values, which
//! both the merge-key ordering and the API server's messages use.
//!
//! One implementation for every patch the kubelet sends (node status, pod
//! status) and for the API server double's checks in tests.

mod diff;
pub mod gofmt;
pub mod schema;

pub use diff::{DiffError, create_two_way_merge_patch, sort_keys};
pub use schema::{ListStrategy, PatchSchema};

/// `$patch`: a directive inside a map or list element.
pub const DIRECTIVE: &str = "$patch";
/// `$retainKeys`: the keys a map keeps.
pub const RETAIN_KEYS: &str = "$retainKeys";
/// `$setElementOrder/<list>`: the order of a merged list.
pub const SET_ELEMENT_ORDER: &str = "$setElementOrder";
/// `$deleteFromPrimitiveList/<list>`: scalars removed from a merged list.
pub const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";

#[cfg(test)]
mod diff_tests;
