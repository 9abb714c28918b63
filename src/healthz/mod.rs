//! healthz: the local health endpoint and its pluggable checks (issue 2).
