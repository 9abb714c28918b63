//! The small parsers fed by flags, files and the kernel: quantities, CPU
//! lists and cpusets, /proc/<pid>/net/dev.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = kubelet::util::quantity::parse(&text);
    let _ = kubelet::util::cpuset::parse_cpu_list(&text);
    let _ = kubelet::cm::cpuset::CpuSet::parse(&text);
    let _ = kubelet::cadvisor::container::parse_net_dev(&text);
});
