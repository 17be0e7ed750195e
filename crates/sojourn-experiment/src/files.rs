//! Reading the files an experiment names (traces, CDFs, the experiment itself): regular
//! files only — a FIFO would block `validate` forever and `/dev/zero` never ends — and at
//! most a stated size, read without trusting the size reported before the read.

use std::io::Read;
use std::path::Path;

/// Reads `path` as UTF-8 text if it is a regular file of at most `cap` bytes. `what`
/// names the file in messages (`trace`, `size distribution`).
pub fn read_regular_text(path: &Path, what: &str, cap: u64) -> Result<String, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {what} {shown}: {e}"))?;
    if !meta.is_file() {
        let kind = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file (a FIFO, device or socket)"
        };
        return Err(format!(
            "{what} {shown} is {kind}; it must be a regular file"
        ));
    }
    let limit = human_bytes(cap);
    if meta.len() > cap {
        return Err(format!(
            "{what} {shown} is {} bytes; at most {limit} are accepted",
            meta.len()
        ));
    }
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read {what} {shown}: {e}"))?;
    // The file may grow after the size check: never read more than the cap.
    let mut buf = Vec::new();
    f.take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read {what} {shown}: {e}"))?;
    if buf.len() as u64 > cap {
        return Err(format!("{what} {shown} is larger than {limit}"));
    }
    String::from_utf8(buf).map_err(|e| {
        format!(
            "{what} {shown} is not text (invalid UTF-8 at byte {})",
            e.utf8_error().valid_up_to()
        )
    })
}

fn human_bytes(b: u64) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else {
        format!("{b} bytes")
    }
}

/// At most this many characters of an offending line are quoted in an error message.
pub const EXCERPT_CHARS: usize = 40;

/// A line for an error message: quoted, cut to [`EXCERPT_CHARS`] characters.
pub fn excerpt(line: &str) -> String {
    let n = line.chars().count();
    if n <= EXCERPT_CHARS {
        format!("{line:?}")
    } else {
        let head: String = line.chars().take(EXCERPT_CHARS).collect();
        format!("{head:?}… ({n} characters)")
    }
}
