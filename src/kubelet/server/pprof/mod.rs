//! `/debug/pprof/`: profiles of the running kubelet, with
//! enableDebuggingHandlers and enableProfilingHandler. `profile?seconds=N`
//! samples the CPU (100 Hz, all threads, default 30 s) with the
//! ecosystem's sampling profiler (pprof-rs) and answers a gzipped pprof
//! protobuf (`go tool pprof` reads it); one CPU profile at a time.
//! `heap` (and `allocs`, as Go serves the same profile there) dumps the
//! live heap from the profiling allocator (`heap`); without one it says so
//! (501).

pub mod heap;
mod profile;

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, StatusCode};
use prost::Message as _;

use super::router::{Handler, HandlerFuture, RequestBody, http_error, respond};

pub use profile::{Profile, StackSample, encode};

/// Where the handler is registered.
pub const PPROF_PATH: &str = "/debug/pprof/";

/// Sampling frequency of CPU profiles, in Hz (Go's).
const FREQUENCY: i32 = 100;
/// Profile length when `seconds` is absent or not a positive number.
const DEFAULT_SECONDS: u64 = 30;

/// A CPU profile that could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("Could not enable CPU profiling: {0}")]
    Start(#[source] pprof::Error),
    #[error("Could not build the CPU profile: {0}")]
    Report(#[source] pprof::Error),
    #[error("Could not compress the CPU profile: {0}")]
    Compress(#[source] std::io::Error),
}

const INDEX: &str = "/debug/pprof/\n\nprofile: CPU profile; ?seconds=N samples for N seconds (default 30) and answers a gzipped pprof protobuf\nheap: live heap (in-use bytes by allocation stack), a gzipped pprof protobuf\n";

fn seconds(query: Option<&str>) -> u64 {
    url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .find(|(k, _)| k == "seconds")
        .and_then(|(_, v)| v.parse::<i64>().ok())
        .filter(|s| *s > 0)
        .map(|s| s as u64)
        .unwrap_or(DEFAULT_SECONDS)
}

/// Samples this process's CPU for `duration` (blocking) and returns the
/// gzipped profile.
pub fn cpu_profile(duration: Duration) -> Result<Vec<u8>, ProfileError> {
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(FREQUENCY)
        .build()
        .map_err(ProfileError::Start)?;
    std::thread::sleep(duration);
    let report = guard.report().build().map_err(ProfileError::Report)?;
    drop(guard);
    let samples: Vec<StackSample> = report
        .data
        .iter()
        .map(|(frames, count)| StackSample {
            frames: frames
                .frames
                .iter()
                .map(|f| {
                    f.iter()
                        .map(|s| {
                            (
                                s.name(),
                                s.sys_name().into_owned(),
                                s.filename().into_owned(),
                                s.lineno.map(i64::from).unwrap_or(0),
                            )
                        })
                        .collect()
                })
                .collect(),
            thread: frames.thread_name_or_id(),
            count: *count as i64,
        })
        .collect();
    let t = &report.timing;
    let bytes = encode(&samples, t.frequency, t.start_time, t.duration).encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&bytes).map_err(ProfileError::Compress)?;
    gz.finish().map_err(ProfileError::Compress)
}

struct Pprof;

impl Handler for Pprof {
    fn call(&self, req: Request<RequestBody>) -> HandlerFuture {
        let path = req.uri().path().to_string();
        let secs = seconds(req.uri().query());
        Box::pin(async move {
            match path.trim_start_matches(PPROF_PATH) {
                "" => respond(StatusCode::OK, "text/plain; charset=utf-8", INDEX),
                "profile" => {
                    let d = Duration::from_secs(secs);
                    match tokio::task::spawn_blocking(move || cpu_profile(d)).await {
                        Ok(Ok(body)) => {
                            let mut resp =
                                respond(StatusCode::OK, "application/octet-stream", body);
                            resp.headers_mut().insert(
                                http::header::CONTENT_DISPOSITION,
                                http::HeaderValue::from_static("attachment; filename=\"profile\""),
                            );
                            resp
                        }
                        Ok(Err(e)) => http_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
                        Err(e) => http_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
                    }
                }
                "heap" | "allocs" => match tokio::task::spawn_blocking(heap::heap_profile).await {
                    Ok(Ok(body)) => {
                        let mut resp = respond(StatusCode::OK, "application/octet-stream", body);
                        resp.headers_mut().insert(
                            http::header::CONTENT_DISPOSITION,
                            http::HeaderValue::from_static("attachment; filename=\"heap\""),
                        );
                        resp
                    }
                    Ok(Err(e @ (heap::HeapError::Unavailable | heap::HeapError::Inactive))) => {
                        http_error(StatusCode::NOT_IMPLEMENTED, &e.to_string())
                    }
                    Ok(Err(e)) => http_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
                    Err(e) => http_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
                },
                _ => http_error(StatusCode::NOT_FOUND, "Unknown profile"),
            }
        })
    }
}

/// The `/debug/pprof/` handler.
pub fn pprof_handler() -> Arc<dyn Handler> {
    Arc::new(Pprof)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_table() {
        let cases = [
            (None, 30),
            (Some("seconds=2"), 2),
            (Some("seconds=0"), 30),
            (Some("seconds=-1"), 30),
            (Some("seconds=x"), 30),
            (Some("debug=1&seconds=5"), 5),
        ];
        for (q, want) in cases {
            assert_eq!(seconds(q), want, "{q:?}");
        }
    }

    #[test]
    fn a_cpu_profile_of_this_process_decodes() {
        let profile = std::thread::spawn(|| cpu_profile(Duration::from_millis(600)));
        std::thread::sleep(Duration::from_millis(50));
        // Busy work on a thread started while the profiler runs.
        let burn = std::thread::spawn(|| {
            let t = std::time::Instant::now();
            let mut x = 0u64;
            while t.elapsed() < Duration::from_millis(400) {
                x = x.wrapping_mul(31).wrapping_add(7);
            }
            x
        });
        let _ = burn.join();
        let gz = profile.join().expect("profiler thread").expect("profile");
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz.as_slice()), &mut bytes)
            .expect("gzip");
        let p = Profile::decode(bytes.as_slice()).expect("pprof protobuf");
        // Which threads the kernel delivers SIGPROF to varies (this sandbox
        // samples only threads it created after the timer started), so the
        // samples themselves are not asserted; the format and timing are.
        assert_eq!(p.period, 10_000_000);
        assert_eq!(
            p.string_table[p.sample_type[1].unit as usize],
            "nanoseconds"
        );
        assert!(p.duration_nanos >= 600_000_000);
    }
}
