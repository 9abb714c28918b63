//! Sanity checks on runtime answers: the kubelet refuses statuses that lack
//! the fields it keys its bookkeeping on.

use super::api;

/// The field a runtime answer lacks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MissingField {
    #[error("status.{0} is not set")]
    Status(&'static str),
    #[error("metadata.Name, metadata.Namespace or metadata.Uid is not in metadata {0}")]
    SandboxMetadata(String),
    #[error("metadata.Name is not in metadata {0}")]
    ContainerMetadata(String),
}

/// A sandbox status needs an id, full metadata and a creation time.
pub fn verify_sandbox_status(status: &api::PodSandboxStatus) -> Result<(), MissingField> {
    if status.id.is_empty() {
        return Err(MissingField::Status("Id"));
    }
    let Some(meta) = status.metadata.as_ref() else {
        return Err(MissingField::Status("Metadata"));
    };
    if meta.name.is_empty() || meta.namespace.is_empty() || meta.uid.is_empty() {
        return Err(MissingField::SandboxMetadata(format!("{meta:?}")));
    }
    if status.created_at == 0 {
        return Err(MissingField::Status("CreatedAt"));
    }
    Ok(())
}

/// An image a runtime reports needs an id and a size (the kubelet keys
/// containers' image references and image GC on them).
pub fn image_is_complete(found: &api::Image) -> bool {
    !found.id.is_empty() && found.size != 0
}

/// An ImageStatus answer of `endpoint` for `image`: refused when it names
/// an image that is not complete ("not found" is an answer without one).
pub fn check_image_status(
    endpoint: &str,
    image: &api::ImageSpec,
    resp: &api::ImageStatusResponse,
) -> Result<(), super::CriError> {
    match resp.image.as_ref() {
        Some(found) if !image_is_complete(found) => {
            Err(super::CriError::incomplete_image(endpoint, &image.image))
        }
        _ => Ok(()),
    }
}

/// A container status needs an id, a name, a creation time and its image.
pub fn verify_container_status(status: &api::ContainerStatus) -> Result<(), MissingField> {
    if status.id.is_empty() {
        return Err(MissingField::Status("Id"));
    }
    let Some(meta) = status.metadata.as_ref() else {
        return Err(MissingField::Status("Metadata"));
    };
    if meta.name.is_empty() {
        return Err(MissingField::ContainerMetadata(format!("{meta:?}")));
    }
    if status.created_at == 0 {
        return Err(MissingField::Status("CreatedAt"));
    }
    if status.image.as_ref().is_none_or(|i| i.image.is_empty()) {
        return Err(MissingField::Status("Image"));
    }
    if status.image_ref.is_empty() {
        return Err(MissingField::Status("ImageRef"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good_sandbox() -> api::PodSandboxStatus {
        api::PodSandboxStatus {
            id: "abc".into(),
            metadata: Some(api::PodSandboxMetadata {
                name: "p".into(),
                uid: "u".into(),
                namespace: "ns".into(),
                attempt: 0,
            }),
            created_at: 1,
            ..Default::default()
        }
    }

    fn good_container() -> api::ContainerStatus {
        api::ContainerStatus {
            id: "c".into(),
            metadata: Some(api::ContainerMetadata {
                name: "n".into(),
                attempt: 0,
            }),
            created_at: 1,
            image: Some(api::ImageSpec {
                image: "busybox".into(),
                ..Default::default()
            }),
            image_ref: "sha256:1".into(),
            ..Default::default()
        }
    }

    #[test]
    fn sandbox_status_table() {
        type Mutate = fn(&mut api::PodSandboxStatus);
        let table: &[(&str, Mutate, Option<&str>)] = &[
            ("complete", |_| {}, None),
            ("no id", |s| s.id.clear(), Some("Id")),
            ("no metadata", |s| s.metadata = None, Some("Metadata")),
            (
                "no uid",
                |s| {
                    if let Some(m) = s.metadata.as_mut() {
                        m.uid.clear()
                    }
                },
                Some("Uid"),
            ),
            ("no created_at", |s| s.created_at = 0, Some("CreatedAt")),
        ];
        for (name, mutate, want) in table {
            let mut s = good_sandbox();
            mutate(&mut s);
            match (verify_sandbox_status(&s), want) {
                (Ok(()), None) => {}
                (Err(e), Some(w)) => assert!(e.to_string().contains(w), "{name}: {e}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn container_status_table() {
        type Mutate = fn(&mut api::ContainerStatus);
        let table: &[(&str, Mutate, Option<&str>)] = &[
            ("complete", |_| {}, None),
            ("no id", |s| s.id.clear(), Some("Id")),
            ("no metadata", |s| s.metadata = None, Some("Metadata")),
            ("no created_at", |s| s.created_at = 0, Some("CreatedAt")),
            ("no image", |s| s.image = None, Some("Image")),
            ("no image ref", |s| s.image_ref.clear(), Some("ImageRef")),
        ];
        for (name, mutate, want) in table {
            let mut s = good_container();
            mutate(&mut s);
            match (verify_container_status(&s), want) {
                (Ok(()), None) => {}
                (Err(e), Some(w)) => assert!(e.to_string().contains(w), "{name}: {e}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }
}
