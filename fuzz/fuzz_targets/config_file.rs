//! A KubeletConfiguration file (YAML or JSON, any bytes): decoded, never a
//! panic, whatever the document.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = kubelet::apis::config::loader::decode_document(
        std::path::Path::new("/etc/kubernetes/kubelet-conf.yml"),
        &text,
    );
});
