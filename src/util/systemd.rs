//! Readiness notification to systemd (`Type=notify` units): `READY=1` on the
//! socket named by `NOTIFY_SOCKET`, sent once the kubelet has started. Without
//! that variable (not run by systemd) nothing is sent.

/// The variable systemd sets for notify-type services.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Sends `READY=1`. Returns `Ok(true)` when a notification was sent and
/// `Ok(false)` when there is no notify socket. The environment is left as is,
/// so children keep seeing the variable, as with the Go kubelet.
pub fn notify_ready() -> std::io::Result<bool> {
    if std::env::var_os(NOTIFY_SOCKET).is_none() {
        return Ok(false);
    }
    sd_notify::notify(&[sd_notify::NotifyState::Ready])?;
    Ok(true)
}

/// run()'s last step: tells systemd the kubelet is up; a failure is logged
/// and otherwise ignored.
pub fn notify_started() {
    match notify_ready() {
        Ok(true) => crate::vlog!(2, "Notified systemd: READY=1"),
        Ok(false) => crate::vlog!(4, "No NOTIFY_SOCKET; not notifying systemd"),
        Err(err) => tracing::warn!(error = %err, "Failed to notify systemd of readiness"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;
    use std::process::Command;
    use std::time::Duration;

    const CHILD_ENV: &str = "KUBELET_TEST_SDNOTIFY_CHILD";

    /// Not a test on its own: runs in a child process whose environment the
    /// parent controls, and prints what `notify_ready` returned.
    #[test]
    #[ignore]
    fn notify_child() {
        if std::env::var_os(CHILD_ENV).is_none() {
            return;
        }
        match notify_ready() {
            Ok(sent) => println!("RESULT sent={sent}"),
            Err(e) => println!("RESULT error={e}"),
        }
    }

    fn run_child(socket: Option<&std::path::Path>) -> String {
        let exe = std::env::current_exe().unwrap();
        let mut cmd = Command::new(exe);
        cmd.args([
            "--exact",
            "util::systemd::tests::notify_child",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, "1")
        .env_remove(NOTIFY_SOCKET);
        if let Some(socket) = socket {
            cmd.env(NOTIFY_SOCKET, socket);
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        stdout
            .lines()
            .find(|l| l.starts_with("RESULT "))
            .unwrap_or_else(|| panic!("child printed no result: {stdout}"))
            .to_string()
    }

    #[test]
    fn ready_is_sent_to_the_notify_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let sock = UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        assert_eq!(run_child(Some(&path)), "RESULT sent=true");
        let mut buf = [0u8; 256];
        let n = sock.recv(&mut buf).unwrap();
        assert_eq!(std::str::from_utf8(&buf[..n]).unwrap().trim(), "READY=1");
    }

    #[test]
    fn no_socket_is_a_no_op() {
        assert_eq!(run_child(None), "RESULT sent=false");
    }

    #[test]
    fn a_dead_socket_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let line = run_child(Some(&dir.path().join("absent.sock")));
        assert!(line.starts_with("RESULT error="), "{line}");
    }
}
