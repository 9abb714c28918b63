//! Shared support for the integration tests (`mod support;` in a test file).

pub mod apiserver;
