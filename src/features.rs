//! Feature gates known to the kubelet of the v1.25 line (issue 2).
