//! An API server double for integration tests, plus the same test API over a
//! real kube-apiserver when the environment names one (see README.md here).
//!
//! The double speaks the Kubernetes HTTP/JSON protocol over HTTPS, so the
//! kubelet's `kube` client code runs against it unchanged: discovery, CRUD with
//! resourceVersion semantics, status subresources, merge / strategic-merge /
//! JSON patches, list and watch (bookmarks, 410 Gone after compaction), the
//! CSR approval and signing flow, TokenRequest, client-certificate and bearer
//! token authentication. Tests drive it through [`TestApi`].
//!
//! Each integration test crate compiles this module on its own and uses only
//! part of it.
#![allow(dead_code, unused_imports)]

mod admission;
mod auth;
mod csr;
mod defaults;
mod delete;
mod discovery;
mod errors;
mod faults;
mod http;
mod kubeconfig;
mod list;
mod meta;
mod ops;
mod options;
mod patch;
mod pki;
mod rbac;
mod real;
mod reqlog;
mod resources;
mod selectors;
mod server;
mod store;
mod strategic;
mod strategy;
mod testapi;
pub mod testkit;
mod tokens;
mod typed;
mod watch;

pub use auth::UserInfo;
pub use faults::{Fault, FaultAction, Verb};
pub use kubeconfig::KubeUser;
pub use options::DoubleOptions;
pub use pki::{
    IssuedCert, Pki, Subject, cert_pem_subject, cert_subject, cert_validity, csr_subject,
    verify_client_cert_with_ca,
};
pub use rbac::SarPolicy;
pub use reqlog::RequestRecord;
pub use server::ApiServerDouble;
pub use strategic::{SmpError, apply as strategic_merge_patch};
pub use testapi::{TestApi, Unsupported};
