//! The name checks the kubelet applies at run time (hostnames, subdomains,
//! env var names, label keys): apimachinery's rules and messages, from the one
//! implementation in `util::validation`.

pub use crate::util::validation::{
    DNS1123_LABEL_MAX_LENGTH, DNS1123_SUBDOMAIN_MAX_LENGTH, QUALIFIED_NAME_MAX_LENGTH,
    is_dns1123_label, is_dns1123_subdomain, is_env_var_name, is_qualified_name,
};
