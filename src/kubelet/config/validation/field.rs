//! Field errors printed the way the API machinery prints them.

use std::fmt;

/// The kind of a field error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    Internal,
}

impl ErrorType {
    fn as_str(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Internal => "Internal error",
        }
    }
}

/// The offending value, printed as Go prints it in a field error.
#[derive(Debug, Clone, PartialEq)]
pub enum BadValue {
    None,
    Str(String),
    Int(i64),
    Bool(bool),
    /// Anything else, already rendered.
    Other(String),
}

impl From<&str> for BadValue {
    fn from(s: &str) -> Self {
        BadValue::Str(s.to_string())
    }
}

impl From<&String> for BadValue {
    fn from(s: &String) -> Self {
        BadValue::Str(s.clone())
    }
}

impl From<String> for BadValue {
    fn from(s: String) -> Self {
        BadValue::Str(s)
    }
}

impl From<i64> for BadValue {
    fn from(v: i64) -> Self {
        BadValue::Int(v)
    }
}

impl From<i32> for BadValue {
    fn from(v: i32) -> Self {
        BadValue::Int(v.into())
    }
}

impl From<bool> for BadValue {
    fn from(v: bool) -> Self {
        BadValue::Bool(v)
    }
}

impl BadValue {
    /// A list of strings, as Go's `%#v` prints a `[]string`.
    pub fn strings(items: &[String]) -> Self {
        let inner: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
        BadValue::Other(format!("[]string{{{}}}", inner.join(", ")))
    }
}

/// One problem with one field.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub kind: ErrorType,
    pub field: String,
    pub bad_value: BadValue,
    pub detail: String,
}

impl FieldError {
    fn new(
        kind: ErrorType,
        field: impl Into<String>,
        bad_value: BadValue,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            kind,
            field: field.into(),
            bad_value,
            detail: detail.into(),
        }
    }

    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, field, BadValue::None, detail)
    }

    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, field, BadValue::None, detail)
    }

    pub fn invalid(
        field: impl Into<String>,
        value: impl Into<BadValue>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(ErrorType::Invalid, field, value.into(), detail)
    }

    pub fn duplicate(field: impl Into<String>, value: impl Into<BadValue>) -> Self {
        Self::new(ErrorType::Duplicate, field, value.into(), "")
    }

    pub fn not_found(field: impl Into<String>, value: impl Into<BadValue>) -> Self {
        Self::new(ErrorType::NotFound, field, value.into(), "")
    }

    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Self::new(
            ErrorType::TooLong,
            field,
            BadValue::None,
            format!("must have at most {max} bytes"),
        )
    }

    pub fn not_supported(
        field: impl Into<String>,
        value: impl Into<BadValue>,
        supported: &[&str],
    ) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(ErrorType::NotSupported, field, value.into(), detail)
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.kind.as_str())?;
        match self.kind {
            ErrorType::Required
            | ErrorType::Forbidden
            | ErrorType::TooLong
            | ErrorType::Internal => {}
            _ => match &self.bad_value {
                BadValue::None => f.write_str(": null")?,
                BadValue::Str(s) => write!(f, ": {s:?}")?,
                BadValue::Int(v) => write!(f, ": {v}")?,
                BadValue::Bool(v) => write!(f, ": {v}")?,
                BadValue::Other(s) => write!(f, ": {s}")?,
            },
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// Every problem found, in the order found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ErrorList(pub Vec<FieldError>);

impl ErrorList {
    pub fn push(&mut self, e: FieldError) {
        self.0.push(e);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, FieldError> {
        self.0.iter()
    }

    /// Invalid-value errors for each message a name check returned.
    pub fn invalid_each(&mut self, field: &str, value: &str, messages: Vec<String>) {
        for m in messages {
            self.push(FieldError::invalid(field, value, m));
        }
    }
}

impl fmt::Display for ErrorList {
    /// `[first second ...]`, as Go prints an error list with `%v`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{e}")?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_print_like_the_api_server() {
        let cases = [
            (
                FieldError::required("spec.containers[0].image", ""),
                "spec.containers[0].image: Required value",
            ),
            (
                FieldError::invalid(
                    "spec.containers[0].ports[0].containerPort",
                    70000,
                    "must be between 1 and 65535, inclusive",
                ),
                "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            ),
            (
                FieldError::not_supported(
                    "spec.restartPolicy",
                    "Sometimes",
                    &["Always", "OnFailure", "Never"],
                ),
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ),
            (
                FieldError::duplicate("spec.containers[1].name", "a"),
                "spec.containers[1].name: Duplicate value: \"a\"",
            ),
            (
                FieldError::too_long("metadata.annotations", 262144),
                "metadata.annotations: Too long: must have at most 262144 bytes",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
        let list = ErrorList(vec![
            FieldError::required("a", ""),
            FieldError::forbidden("b", "no"),
        ]);
        assert_eq!(list.to_string(), "[a: Required value b: Forbidden: no]");
    }
}
