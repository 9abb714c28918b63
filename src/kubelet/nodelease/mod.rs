//! Lease.
