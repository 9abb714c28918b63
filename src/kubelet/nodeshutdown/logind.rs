//! systemd-logind over the system D-Bus: the shutdown delay inhibitor, its
//! maximum (InhibitDelayMaxUSec), the PrepareForShutdown signal, and the
//! reload that makes logind read a raised maximum. The system bus is the
//! one `DBUS_SYSTEM_BUS_ADDRESS` names, as for every D-Bus client.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;

use super::ShutdownError;

const LOGIND_DEST: &str = "org.freedesktop.login1";
const LOGIND_PATH: &str = "/org/freedesktop/login1";
const LOGIND_MANAGER: &str = "org.freedesktop.login1.Manager";
const SYSTEMD_DEST: &str = "org.freedesktop.systemd1";
const SYSTEMD_PATH: &str = "/org/freedesktop/systemd1";
const SYSTEMD_MANAGER: &str = "org.freedesktop.systemd1.Manager";
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";

/// Where the kubelet's logind drop-in goes.
pub const LOGIND_CONF_DIR: &str = "/etc/systemd/logind.conf.d";
/// The drop-in's name.
pub const KUBELET_LOGIND_CONF: &str = "99-kubelet.conf";

/// A held delay inhibitor: logind waits for it (up to its maximum) before
/// shutting down; dropping it releases it.
#[derive(Debug)]
pub struct InhibitLock(#[allow(dead_code)] OwnedFd);

impl InhibitLock {
    pub fn new(fd: OwnedFd) -> Self {
        InhibitLock(fd)
    }
}

/// Opens connections to logind (a new one after the old one ended).
#[async_trait]
pub trait LogindBus: Send + Sync + 'static {
    async fn connect(&self) -> Result<Box<dyn Logind>, ShutdownError>;
}

/// One connection to logind.
#[async_trait]
pub trait Logind: Send + Sync {
    /// InhibitDelayMaxUSec: the longest a delay inhibitor may hold
    /// shutdown back.
    async fn current_inhibit_delay(&self) -> Result<Duration, ShutdownError>;
    /// Takes a shutdown delay inhibitor for the kubelet.
    async fn inhibit_shutdown(&self) -> Result<InhibitLock, ShutdownError>;
    /// Makes logind reread its configuration (SIGHUP through systemd).
    async fn reload_logind_conf(&self) -> Result<(), ShutdownError>;
    /// PrepareForShutdown signals (`true`: shutting down, `false`:
    /// cancelled); the stream ends with the connection.
    async fn monitor_shutdown(&self) -> Result<BoxStream<'static, bool>, ShutdownError>;
}

/// Writes the drop-in raising logind's InhibitDelayMaxSec to `delay`.
pub async fn override_inhibit_delay(dir: &Path, delay: Duration) -> Result<(), ShutdownError> {
    let body = format!(
        "# Written by the kubelet: room for graceful node shutdown\n[Login]\nInhibitDelayMaxSec={}\n",
        delay.as_secs_f64().round() as u64
    );
    let dir: PathBuf = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&dir).map_err(|source| ShutdownError::Io {
            path: dir.clone(),
            source,
        })?;
        let path = dir.join(KUBELET_LOGIND_CONF);
        std::fs::write(&path, body).map_err(|source| ShutdownError::Io { path, source })
    })
    .await
    .map_err(|e| ShutdownError::Io {
        path: PathBuf::from(LOGIND_CONF_DIR),
        source: std::io::Error::other(e),
    })?
}

/// The system bus.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemBus;

#[async_trait]
impl LogindBus for SystemBus {
    async fn connect(&self) -> Result<Box<dyn Logind>, ShutdownError> {
        let conn = zbus::Connection::system()
            .await
            .map_err(|e| ShutdownError::dbus("connecting to the system bus", e))?;
        Ok(Box::new(DbusLogind { conn }))
    }
}

/// logind on one system bus connection.
struct DbusLogind {
    conn: zbus::Connection,
}

#[async_trait]
impl Logind for DbusLogind {
    async fn current_inhibit_delay(&self) -> Result<Duration, ShutdownError> {
        let what = "reading InhibitDelayMaxUSec from logind";
        let reply = self
            .conn
            .call_method(
                Some(LOGIND_DEST),
                LOGIND_PATH,
                Some(PROPERTIES),
                "Get",
                &(LOGIND_MANAGER, "InhibitDelayMaxUSec"),
            )
            .await
            .map_err(|e| ShutdownError::dbus(what, e))?;
        let value: zbus::zvariant::OwnedValue = reply
            .body()
            .deserialize()
            .map_err(|e| ShutdownError::dbus(what, e))?;
        let usec = u64::try_from(value).map_err(|_| ShutdownError::NotUsec)?;
        Ok(Duration::from_micros(usec))
    }

    async fn inhibit_shutdown(&self) -> Result<InhibitLock, ShutdownError> {
        let what = "creating the systemd inhibitor";
        let reply = self
            .conn
            .call_method(
                Some(LOGIND_DEST),
                LOGIND_PATH,
                Some(LOGIND_MANAGER),
                "Inhibit",
                &(
                    "shutdown",
                    "kubelet",
                    "Kubelet needs time to handle node shutdown",
                    "delay",
                ),
            )
            .await
            .map_err(|e| ShutdownError::dbus(what, e))?;
        let fd: zbus::zvariant::OwnedFd = reply
            .body()
            .deserialize()
            .map_err(|e| ShutdownError::dbus("reading the inhibitor's file descriptor", e))?;
        Ok(InhibitLock::new(OwnedFd::from(fd)))
    }

    async fn reload_logind_conf(&self) -> Result<(), ShutdownError> {
        self.conn
            .call_method(
                Some(SYSTEMD_DEST),
                SYSTEMD_PATH,
                Some(SYSTEMD_MANAGER),
                "KillUnit",
                &("systemd-logind.service", "all", 1i32),
            )
            .await
            .map_err(|e| ShutdownError::dbus("reloading logind's configuration", e))?;
        Ok(())
    }

    async fn monitor_shutdown(&self) -> Result<BoxStream<'static, bool>, ShutdownError> {
        let what = "watching PrepareForShutdown";
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .interface(LOGIND_MANAGER)
            .and_then(|b| b.member("PrepareForShutdown"))
            .and_then(|b| b.path(LOGIND_PATH))
            .map_err(|e| ShutdownError::dbus(what, e))?
            .build();
        let signals = zbus::MessageStream::for_match_rule(rule, &self.conn, Some(16))
            .await
            .map_err(|e| ShutdownError::dbus(what, e))?
            .filter_map(|msg| async move {
                match msg.and_then(|m| m.body().deserialize::<bool>()) {
                    Ok(active) => Some(active),
                    Err(e) => {
                        tracing::error!(err = %e, "Failed obtaining shutdown event, PrepareForShutdown event was not bool type as expected");
                        None
                    }
                }
            });
        Ok(signals.boxed())
    }
}
