//! Tests of the command pipeline (argv → KubeletServer).

mod flags_tsv;
mod invalid;
mod pipeline;
