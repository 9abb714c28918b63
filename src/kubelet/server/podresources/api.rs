//! The pod-resources API (packages `v1` and `v1alpha1`), generated.

#![allow(clippy::all, missing_docs)]

pub mod v1 {
    tonic::include_proto!("v1");
}

pub mod v1alpha1 {
    tonic::include_proto!("v1alpha1");
}
