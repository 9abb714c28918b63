//! The kernel's CPU (or NUMA node) list form, `0-3,8`: one parser for the
//! configuration's validation and the container manager's CpuSet.

use std::collections::BTreeSet;

/// A list that is not `id[-id][,...]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    #[error("invalid cpu id {id:?} in {list:?}")]
    Id { id: String, list: String },
    #[error("invalid range {range:?}: start above end")]
    Reversed { range: String },
    #[error("invalid range {range:?} in {list:?}")]
    Range { range: String, list: String },
}

/// Parses `0-3,8`; blank text is the empty set.
pub fn parse_cpu_list(text: &str) -> Result<BTreeSet<u32>, CpuListError> {
    let mut set = BTreeSet::new();
    let text = text.trim();
    if text.is_empty() {
        return Ok(set);
    }
    for part in text.split(',') {
        let bounds: Vec<&str> = part.split('-').collect();
        let num = |s: &str| {
            s.trim().parse::<u32>().map_err(|_| CpuListError::Id {
                id: s.to_string(),
                list: text.to_string(),
            })
        };
        match bounds.as_slice() {
            [one] => {
                set.insert(num(one)?);
            }
            [lo, hi] => {
                let (lo, hi) = (num(lo)?, num(hi)?);
                if lo > hi {
                    return Err(CpuListError::Reversed {
                        range: part.to_string(),
                    });
                }
                set.extend(lo..=hi);
            }
            _ => {
                return Err(CpuListError::Range {
                    range: part.to_string(),
                    list: text.to_string(),
                });
            }
        }
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_table() {
        let ok: &[(&str, &[u32])] = &[
            ("", &[]),
            ("  ", &[]),
            ("0", &[0]),
            ("0-3,8", &[0, 1, 2, 3, 8]),
            (" 1 , 3-4 ", &[1, 3, 4]),
            ("2-2", &[2]),
        ];
        for (text, want) in ok {
            let got: Vec<u32> = parse_cpu_list(text).unwrap().into_iter().collect();
            assert_eq!(&got, want, "{text:?}");
        }
        let bad = ["a", "3-1", "1-2-3", "1,,2", "-1", "1-"];
        for text in bad {
            assert!(parse_cpu_list(text).is_err(), "{text:?}");
        }
    }
}
