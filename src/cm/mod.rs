//! ContainerManager: cgroups, node allocatable, QoS and pod cgroups (issue 4).
