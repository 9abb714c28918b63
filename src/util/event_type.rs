//! The `type` of a Kubernetes event, shared by every layer that records
//! events (the container manager below the kubelet, the kubelet's recorder).

/// The `type` of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    /// The API spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}
