//! Small building blocks shared by every stage.

pub mod atomic_file;
pub mod backoff;
pub mod clock;
pub mod cpuset;
pub mod event_type;
pub mod fieldpath;
pub mod inotify;
pub mod lifecycle;
pub mod lockfile;
pub mod mountinfo;
pub mod node_name;
pub mod object_getters;
pub mod oom;
pub mod path;
pub mod pod_dirs;
pub mod quantity;
pub mod resource;
pub mod rlimit;
pub mod router;
pub mod signals;
pub mod strategicpatch;
pub mod strconv;
pub mod swap;
pub mod systemd;
pub mod validation;
pub mod yaml;
