//! pkg/credentialprovider: registry credentials for image pulls beyond the
//! pod's pull secrets.

pub mod url;
