//! Go's strconv.ParseBool, for values that Go parses with it (flag and
//! feature-gate values).

/// A value ParseBool does not accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("strconv.ParseBool: parsing {input:?}: invalid syntax")]
pub struct ParseBoolError {
    pub input: String,
}

/// `1 t T TRUE true True` and `0 f F FALSE false False`, nothing else.
pub fn parse_go_bool(s: &str) -> Result<bool, ParseBoolError> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(ParseBoolError {
            input: s.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_spellings_only() {
        for (input, want) in [("1", Some(true)), ("True", Some(true)), ("F", Some(false))] {
            assert_eq!(parse_go_bool(input).ok(), want, "{input}");
        }
        for input in ["yes", "tRUE", ""] {
            let e = parse_go_bool(input).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("strconv.ParseBool: parsing {input:?}: invalid syntax")
            );
        }
    }
}
