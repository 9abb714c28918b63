//! Small building blocks shared by every stage.

pub mod backoff;
pub mod clock;
pub mod inotify;
pub mod lifecycle;
pub mod lockfile;
pub mod node_name;
pub mod oom;
pub mod quantity;
pub mod rlimit;
pub mod signals;
pub mod strategicpatch;
pub mod swap;
pub mod systemd;
pub mod validation;
pub mod yaml;
