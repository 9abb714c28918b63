//! One log entry as both formats see it: severity, source location,
//! message, klog verbosity, error and key/value pairs in call order.

use std::fmt;

use tracing::field::{Field, Visit};

/// klog's severities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn from_level(level: &tracing::Level) -> Self {
        match *level {
            tracing::Level::ERROR => Severity::Error,
            tracing::Level::WARN => Severity::Warning,
            _ => Severity::Info,
        }
    }

    /// The header letter.
    pub fn letter(self) -> char {
        match self {
            Severity::Info => 'I',
            Severity::Warning => 'W',
            Severity::Error => 'E',
        }
    }
}

/// A value as logged: text (quoted by the text format, a JSON string) or
/// a number/boolean (bare in both).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Text(String),
    Int(i64),
    Uint(u64),
    Float(f64),
    Bool(bool),
}

/// One entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub severity: Severity,
    /// Source file path as the compiler gave it.
    pub file: String,
    pub line: u32,
    pub message: String,
    /// The entry's klog verbosity (`vlog!(n, ...)`), 0 otherwise.
    pub verbosity: u32,
    /// An `err`/`error` field.
    pub err: Option<String>,
    pub fields: Vec<(String, Value)>,
    /// A printf-style entry: the text format prints the message unquoted.
    pub printf: bool,
}

impl Record {
    pub fn new(severity: Severity, file: &str, line: u32, message: &str) -> Self {
        Record {
            severity,
            file: file.to_string(),
            line,
            message: message.to_string(),
            verbosity: 0,
            err: None,
            fields: Vec::new(),
            printf: false,
        }
    }

    /// Adds a key/value pair (builder style, for tests and callers without tracing).
    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.fields.push((key.to_string(), value));
        self
    }
}

/// Collects an event's fields into a [`Record`].
pub struct RecordVisitor<'a>(pub &'a mut Record);

impl RecordVisitor<'_> {
    fn put(&mut self, field: &Field, value: Value) {
        match field.name() {
            "message" => {
                if let Value::Text(t) = value {
                    self.0.message = t;
                }
            }
            "v" => {
                if let Value::Int(v) = value {
                    self.0.verbosity = u32::try_from(v).unwrap_or(0);
                } else if let Value::Uint(v) = value {
                    self.0.verbosity = u32::try_from(v).unwrap_or(0);
                }
            }
            "err" | "error" => {
                self.0.err = Some(match value {
                    Value::Text(t) => t,
                    Value::Int(i) => i.to_string(),
                    Value::Uint(u) => u.to_string(),
                    Value::Float(f) => f.to_string(),
                    Value::Bool(b) => b.to_string(),
                });
            }
            name => self.0.fields.push((name.to_string(), value)),
        }
    }
}

impl Visit for RecordVisitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::Text(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::Text(value.to_string()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::Int(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::Uint(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::Float(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::Text(value.to_string()));
    }
}
