//! Small building blocks shared by every stage.

pub mod backoff;
pub mod clock;
pub mod cpuset;
pub mod inotify;
pub mod lifecycle;
pub mod lockfile;
pub mod mountinfo;
pub mod node_name;
pub mod oom;
pub mod path;
pub mod quantity;
pub mod rlimit;
pub mod signals;
pub mod swap;
pub mod systemd;
pub mod validation;
pub mod yaml;
