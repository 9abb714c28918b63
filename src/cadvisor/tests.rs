//! Machine information from fake /proc, /sys and /etc trees.

use std::path::Path;

use super::*;

fn write(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

const CPUINFO: &str = "\
processor\t: 0
vendor_id\t: AuthenticAMD
cpu MHz\t\t: 2596.096
physical id\t: 0
core id\t\t: 0

processor\t: 1
vendor_id\t: AuthenticAMD
cpu MHz\t\t: 2596.096
physical id\t: 0
core id\t\t: 1
";

/// Two NUMA nodes, two packages, cores with two threads each; cpu 3 offline.
fn numa_machine(root: &Path) {
    write(root, "proc/cpuinfo", CPUINFO);
    write(
        root,
        "proc/meminfo",
        "MemTotal:       24684092 kB\nMemFree: 1 kB\nSwapTotal:  1024 kB\n",
    );
    write(
        root,
        "proc/sys/kernel/random/boot_id",
        "f2fa0d39-68ee-4eb2-b02d-bbc7d08ec845\n",
    );
    write(root, "proc/sys/kernel/osrelease", "6.18.44-fc-v657\n");
    write(root, "etc/machine-id", "3d1219c7c4c5404aaa1f6d2a48adfda4\n");
    write(
        root,
        "etc/os-release",
        "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
    );
    write(
        root,
        "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
        "4\n",
    );
    write(
        root,
        "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages",
        "0\n",
    );
    write(root, "sys/devices/system/cpu/online", "0-2,4-7\n");
    // cpu → (node, package, core)
    let cpus = [
        (0, 0, 0, 0),
        (1, 0, 0, 0),
        (2, 0, 0, 1),
        (3, 0, 0, 1),
        (4, 1, 1, 0),
        (5, 1, 1, 0),
        (6, 1, 1, 1),
        (7, 1, 1, 1),
    ];
    for (cpu, node, pkg, core) in cpus {
        let dir = format!("sys/devices/system/node/node{node}/cpu{cpu}/topology");
        write(root, &format!("{dir}/core_id"), &format!("{core}\n"));
        write(
            root,
            &format!("{dir}/physical_package_id"),
            &format!("{pkg}\n"),
        );
    }
    for node in 0..2 {
        write(
            root,
            &format!("sys/devices/system/node/node{node}/meminfo"),
            &format!(
                "Node {node} MemTotal:       {} kB\nNode {node} MemFree: 1 kB\n",
                1000 + node
            ),
        );
        write(
            root,
            &format!("sys/devices/system/node/node{node}/distance"),
            if node == 0 { "10 21\n" } else { "21 10\n" },
        );
        write(
            root,
            &format!("sys/devices/system/node/node{node}/hugepages/hugepages-2048kB/nr_hugepages"),
            "2\n",
        );
    }
}

#[test]
fn numa_machine_as_cadvisor_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    numa_machine(dir.path());
    let p = HostMachineInfo::new(dir.path());
    let m = p.machine_info().unwrap();
    assert_eq!(m.num_cores, 7, "online logical CPUs");
    assert_eq!(m.num_physical_cores, 2, "distinct core ids in cpuinfo");
    assert_eq!(m.num_sockets, 1, "distinct physical ids in cpuinfo");
    assert_eq!(m.cpu_vendor_id, "AuthenticAMD");
    assert_eq!(m.cpu_frequency_khz, 2_596_096);
    assert_eq!(m.memory_capacity, 24684092 * 1024);
    assert_eq!(m.swap_capacity, 1024 * 1024);
    assert_eq!(
        m.hugepages,
        [
            HugePagesInfo {
                page_size_kib: 1048576,
                num_pages: 0
            },
            HugePagesInfo {
                page_size_kib: 2048,
                num_pages: 4
            },
        ]
    );
    assert_eq!(m.machine_id, "3d1219c7c4c5404aaa1f6d2a48adfda4");
    assert_eq!(
        m.system_uuid, m.machine_id,
        "no DMI: falls back to /etc/machine-id"
    );
    assert_eq!(m.boot_id, "f2fa0d39-68ee-4eb2-b02d-bbc7d08ec845");
    assert_eq!(m.topology.len(), 2);
    let n0 = &m.topology[0];
    assert_eq!(n0.memory, 1000 * 1024);
    assert_eq!(n0.distances, [10, 21]);
    assert_eq!(
        n0.hugepages,
        [HugePagesInfo {
            page_size_kib: 2048,
            num_pages: 2
        }]
    );
    assert_eq!(
        n0.cores,
        [
            Core {
                id: 0,
                threads: vec![0, 1],
                socket_id: 0
            },
            Core {
                id: 1,
                threads: vec![2],
                socket_id: 0
            },
        ]
    );
    assert_eq!(
        m.topology[1].cores[1],
        Core {
            id: 1,
            threads: vec![6, 7],
            socket_id: 1
        }
    );
    assert_eq!(m.cpu_ids(), [0, 1, 2, 4, 5, 6, 7]);

    let v = p.version_info().unwrap();
    assert_eq!(v.kernel_version, "6.18.44-fc-v657");
    assert_eq!(v.os_image, "Debian GNU/Linux 12 (bookworm)");
}

#[test]
fn ids_fall_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    numa_machine(dir.path());
    write(dir.path(), "proc/device-tree/vm,uuid", "vm-uuid\0");
    let p = HostMachineInfo::new(dir.path());
    assert_eq!(p.machine_info().unwrap().system_uuid, "vm-uuid");
    write(dir.path(), "sys/class/dmi/id/product_uuid", "DMI-UUID\n");
    assert_eq!(p.machine_info().unwrap().system_uuid, "DMI-UUID");
    std::fs::remove_file(dir.path().join("etc/machine-id")).unwrap();
    write(dir.path(), "var/lib/dbus/machine-id", "dbus-id\n");
    assert_eq!(p.machine_info().unwrap().machine_id, "dbus-id");
    std::fs::remove_file(dir.path().join("etc/os-release")).unwrap();
    write(dir.path(), "usr/lib/os-release", "ID=x\n");
    assert_eq!(p.version_info().unwrap().os_image, "Linux");
}

#[test]
fn without_numa_nodes_cpus_come_from_the_cpu_bus() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "proc/cpuinfo",
        "processor\t: 0\nprocessor\t: 1\nprocessor\t: 2\n",
    );
    write(root, "proc/meminfo", "MemTotal: 2048 kB\n");
    for (cpu, pkg, core) in [(0, 0, 0), (1, 0, 1), (2, 1, 0)] {
        write(
            root,
            &format!("sys/bus/cpu/devices/cpu{cpu}/topology/core_id"),
            &format!("{core}"),
        );
        write(
            root,
            &format!("sys/bus/cpu/devices/cpu{cpu}/topology/physical_package_id"),
            &format!("{pkg}"),
        );
    }
    let m = HostMachineInfo::new(root).machine_info().unwrap();
    assert_eq!(m.num_cores, 3);
    assert_eq!(m.topology.len(), 2, "one entry per package");
    assert_eq!(
        m.num_physical_cores, 2,
        "sysfs core ids when cpuinfo has none"
    );
    assert_eq!(m.num_sockets, 2, "sysfs package ids when cpuinfo has none");
    assert_eq!(m.cpu_frequency_khz, 0);
    assert!(m.hugepages.is_empty());
    assert_eq!(m.machine_id, "");
}

#[test]
fn missing_meminfo_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "proc/cpuinfo", CPUINFO);
    let err = HostMachineInfo::new(dir.path()).machine_info().unwrap_err();
    assert!(err.to_string().contains("meminfo"), "{err}");
}

#[test]
fn this_host_is_readable() {
    let p = HostMachineInfo::default();
    let m = p.machine_info().unwrap();
    assert!(m.num_cores >= 1);
    assert!(m.memory_capacity > 0);
    let v = p.version_info().unwrap();
    assert!(!v.kernel_version.is_empty());
    let fs = p.fs_info(Path::new("/")).unwrap();
    assert!(fs.capacity > 0 && !fs.mountpoint.is_empty());
}
