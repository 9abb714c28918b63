//! The tracing layer that writes klog text or JSON lines, and the
//! process-wide output settings it reads (format, split streams).

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

use super::json;
use super::klog::{self, HeaderTime};
use super::record::{Record, RecordVisitor, Severity};

const TEXT: u8 = 0;
const JSON: u8 = 1;

static FORMAT: AtomicU8 = AtomicU8::new(TEXT);
static SPLIT_STREAM: AtomicBool = AtomicBool::new(false);

/// Output format of every later entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

pub fn set_format(format: Format, split_stream: bool) {
    FORMAT.store(
        match format {
            Format::Text => TEXT,
            Format::Json => JSON,
        },
        Ordering::Relaxed,
    );
    SPLIT_STREAM.store(split_stream, Ordering::Relaxed);
}

pub fn format() -> Format {
    if FORMAT.load(Ordering::Relaxed) == JSON {
        Format::Json
    } else {
        Format::Text
    }
}

/// Verbosity that lets debug and trace events of libraries through.
const DEBUG_VERBOSITY: u32 = 6;
const TRACE_VERBOSITY: u32 = 9;

fn level_enabled(level: &Level) -> bool {
    match *level {
        Level::DEBUG => super::v_enabled(DEBUG_VERBOSITY),
        Level::TRACE => super::v_enabled(TRACE_VERBOSITY),
        _ => true,
    }
}

/// Writes each event as one line to stderr (or, for info entries in the
/// JSON format with split streams, to stdout).
#[derive(Debug, Default, Clone, Copy)]
pub struct KlogLayer;

impl<S: Subscriber> Layer<S> for KlogLayer {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if !metadata.is_event() {
            return Interest::never();
        }
        match *metadata.level() {
            Level::DEBUG | Level::TRACE => Interest::sometimes(),
            _ => Interest::always(),
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        metadata.is_event() && level_enabled(metadata.level())
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut record = Record::new(
            Severity::from_level(meta.level()),
            meta.file().unwrap_or(meta.target()),
            meta.line().unwrap_or(0),
            "",
        );
        record.printf = meta.target() == super::PRINTF_TARGET;
        event.record(&mut RecordVisitor(&mut record));
        write_record(&record);
    }
}

/// Formats and writes one entry with the current settings.
pub fn write_record(record: &Record) {
    let (line, to_stdout) = match format() {
        Format::Text => {
            let legacy = super::legacy::current();
            let options = legacy
                .as_ref()
                .map(|o| klog::HeaderOptions {
                    skip_headers: o.settings.skip_headers,
                    add_dir: o.settings.add_dir_header,
                })
                .unwrap_or_default();
            let line = klog::format_with(record, &HeaderTime::now(), std::process::id(), options);
            if let Some(output) = legacy {
                output.write(record.severity, &line);
                return;
            }
            (line, false)
        }
        Format::Json => (
            json::format(record, json::epoch_millis(std::time::SystemTime::now())),
            SPLIT_STREAM.load(Ordering::Relaxed) && record.severity != Severity::Error,
        ),
    };
    // A failed write to the log has nowhere to be reported.
    let _ = if to_stdout {
        std::io::stdout().lock().write_all(line.as_bytes())
    } else {
        std::io::stderr().lock().write_all(line.as_bytes())
    };
}
