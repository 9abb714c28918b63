//! Two JSON documents (a pod status as the API holds it and as the kubelet
//! computed it): the strategic merge patch between them.
#![no_main]

use kubelet::util::strategicpatch::{PatchSchema, create_two_way_merge_patch};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut docs = serde_json::Deserializer::from_slice(data).into_iter::<serde_json::Value>();
    if let (Some(Ok(a)), Some(Ok(b))) = (docs.next(), docs.next()) {
        let _ = create_two_way_merge_patch(&a, &b, PatchSchema::of("Pod"));
    }
});
