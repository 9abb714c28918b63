//! The CredentialProviderConfig file: decoding and validation.

use super::config::*;
use crate::apis::config::Duration;

const YAML_V1BETA1: &str = r#"
apiVersion: kubelet.config.k8s.io/v1beta1
kind: CredentialProviderConfig
providers:
  - name: ecr-credential-provider
    matchImages:
      - "*.dkr.ecr.*.amazonaws.com"
      - "registry.local:5000/team"
    defaultCacheDuration: "12h"
    apiVersion: credentialprovider.kubelet.k8s.io/v1beta1
    args: ["get-credentials", "--v=2"]
    env:
      - name: AWS_PROFILE
        value: node
    futureField: tolerated
"#;

fn provider(name: &str) -> CredentialProvider {
    CredentialProvider {
        name: name.into(),
        match_images: vec!["registry.io".into()],
        default_cache_duration: Some(Duration::from_mins(5)),
        api_version: EXEC_API_VERSIONS[0].into(),
        args: vec![],
        env: vec![],
    }
}

#[test]
fn decodes_yaml_and_json_of_both_versions() {
    let config = decode_config(YAML_V1BETA1.as_bytes()).expect("yaml v1beta1");
    assert_eq!(
        config.providers,
        vec![CredentialProvider {
            name: "ecr-credential-provider".into(),
            match_images: vec![
                "*.dkr.ecr.*.amazonaws.com".into(),
                "registry.local:5000/team".into()
            ],
            default_cache_duration: Some(Duration::from_hours(12)),
            api_version: "credentialprovider.kubelet.k8s.io/v1beta1".into(),
            args: vec!["get-credentials".into(), "--v=2".into()],
            env: vec![ExecEnvVar {
                name: "AWS_PROFILE".into(),
                value: "node".into()
            }],
        }]
    );
    let json = r#"{"apiVersion":"kubelet.config.k8s.io/v1alpha1","kind":"CredentialProviderConfig",
        "providers":[{"name":"p","matchImages":["r.io"],"defaultCacheDuration":"0s",
        "apiVersion":"credentialprovider.kubelet.k8s.io/v1alpha1","args":null}]}"#;
    let config = decode_config(json.as_bytes()).expect("json v1alpha1");
    assert_eq!(
        config.providers[0].default_cache_duration,
        Some(Duration::ZERO)
    );
    assert!(config.providers[0].args.is_empty());
}

#[test]
fn decode_errors() {
    let cases: &[(&str, &str)] = &[
        ("", "Object 'Kind' is missing"),
        ("providers: []", "Object 'Kind' is missing"),
        (
            "kind: CredentialProviderConfig",
            "Object 'apiVersion' is missing",
        ),
        (
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig",
            r#"no kind "CredentialProviderConfig" is registered for version "kubelet.config.k8s.io/v1""#,
        ),
        (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration",
            r#"failed to decode "KubeletConfiguration" (wrong Kind)"#,
        ),
        (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: CredentialProviderConfig\nproviders:\n- name: p\n  defaultCacheDuration: soon",
            "field providers[0].defaultCacheDuration: time: invalid duration \"soon\"",
        ),
        (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: CredentialProviderConfig\nproviders: {}",
            "field providers:",
        ),
        ("{", "error converting YAML to JSON"),
    ];
    for (text, want) in cases {
        let err = decode_config(text.as_bytes()).expect_err(text);
        assert!(err.to_string().contains(want), "{text:?}: {err}");
    }
}

#[tokio::test]
async fn load_names_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.yaml");
    let err = load(&missing).await.expect_err("missing");
    assert!(
        err.to_string().starts_with(&format!(
            "unable to read external registry credential provider configuration from {missing:?}"
        )),
        "{err}"
    );
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "kind: Nope\napiVersion: v1").expect("write");
    let err = load(&bad).await.expect_err("bad kind");
    assert!(
        err.to_string().starts_with(&format!(
            "error decoding config {}: no kind \"Nope\"",
            bad.display()
        )),
        "{err}"
    );
    assert_eq!(
        load(std::path::Path::new(""))
            .await
            .expect_err("empty")
            .to_string(),
        "credential provider config path is empty"
    );
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, YAML_V1BETA1).expect("write");
    assert_eq!(load(&good).await.expect("good").providers.len(), 1);
}

#[test]
fn validation_as_go() {
    type Edit = fn(&mut CredentialProviderConfig);
    let cases: &[(&str, Edit, &str)] = &[
        ("valid", |_| {}, ""),
        (
            "no providers",
            |c| c.providers.clear(),
            "providers: Required value: at least 1 item in plugins is required",
        ),
        (
            "slash in name",
            |c| c.providers[0].name = "a/b".into(),
            r#"providers[0].name: Invalid value: "a/b": provider name cannot contain '/'"#,
        ),
        (
            "space in name",
            |c| c.providers[0].name = "a b".into(),
            r#"providers[0].name: Invalid value: "a b": provider name cannot contain spaces"#,
        ),
        (
            "dot",
            |c| c.providers[0].name = ".".into(),
            r#"providers[0].name: Invalid value: ".": provider name cannot be '.'"#,
        ),
        (
            "dot dot",
            |c| c.providers[0].name = "..".into(),
            r#"providers[0].name: Invalid value: "..": provider name cannot be '..'"#,
        ),
        (
            "duplicate name",
            |c| c.providers[1].name = "first".into(),
            r#"providers[1].name: Duplicate value: "first""#,
        ),
        (
            "no apiVersion",
            |c| c.providers[0].api_version.clear(),
            "providers[0].apiVersion: Required value: apiVersion is required",
        ),
        (
            "v1 exec API is not in v1.25",
            |c| c.providers[0].api_version = "credentialprovider.kubelet.k8s.io/v1".into(),
            r#"providers[0].apiVersion: Unsupported value: "credentialprovider.kubelet.k8s.io/v1": supported values: "credentialprovider.kubelet.k8s.io/v1alpha1", "credentialprovider.kubelet.k8s.io/v1beta1""#,
        ),
        (
            "no matchImages",
            |c| c.providers[1].match_images.clear(),
            "providers[1].matchImages: Required value: at least 1 item in matchImages is required",
        ),
        (
            "bad matchImage",
            |c| c.providers[0].match_images.push("registry.io:port".into()),
            r#"providers[0].matchImages: Invalid value: "registry.io:port": match image is invalid: parse "https://registry.io:port": invalid port ":port" after host"#,
        ),
        (
            "no defaultCacheDuration",
            |c| c.providers[0].default_cache_duration = None,
            "providers[0].defaultCacheDuration: Required value: defaultCacheDuration is required",
        ),
        (
            "negative defaultCacheDuration",
            |c| c.providers[0].default_cache_duration = Some(Duration::from_secs(-90)),
            "providers[0].defaultCacheDuration: Invalid value: -1m30s: defaultCacheDuration must be greater than or equal to 0",
        ),
        (
            "several problems, aggregated",
            |c| {
                c.providers[0].name = "a/b".into();
                c.providers[1].default_cache_duration = None;
            },
            r#"[providers[0].name: Invalid value: "a/b": provider name cannot contain '/', providers[1].defaultCacheDuration: Required value: defaultCacheDuration is required]"#,
        ),
    ];
    for (name, edit, want) in cases {
        let mut config = CredentialProviderConfig {
            providers: vec![provider("first"), provider("second")],
        };
        edit(&mut config);
        let got = validate(&config)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(got, *want, "{name}");
    }
}
