//! What this process may really have of the machine's memory, held against the memory
//! estimate before a run starts (docs/limits.md, "What a run may have").
//!
//! Four figures, the smallest wins: the address-space limit (`RLIMIT_AS`, less the
//! address space the process already spans and what a run reserves without touching),
//! the memory limit of the process's own cgroup (v2 `memory.max`, v1
//! `memory.limit_in_bytes`, the smallest along the path to the root), and `MemAvailable`
//! from `/proc/meminfo`. `SOJOURN_MEMORY=<size>` replaces all of them (a larger machine,
//! swap the user accepts). Everything is read from `/proc` and `/sys` as text, so the
//! parsing is tested on literal file contents and no `libc` call is needed.

use sojourn_core::units;

/// Address space a run reserves beyond what it touches: thread stacks, the allocator's
/// per-thread arenas and pyarrow's memory pool map ~1 GiB that stays mostly unresident.
/// Measured (`sojourn run` of the bad-input catalogue's base file, 2 pairs, 2 s): VmSize
/// 563 MB at validation, 1,587 MB at the end, resident 176 → 187 MB; 10,000 pairs: VmSize
/// 589 → 1,941 MB while the resident set grew 388 MB.
pub const RESERVED_ADDRESS_SPACE_BYTES: f64 = 1024.0 * 1024.0 * 1024.0;

/// A v1 cgroup without a limit reports `LONG_MAX` rounded down to a page
/// (9223372036854771712); anything from 2⁶⁰ up is taken as "no limit".
const CGROUP_V1_UNLIMITED: u64 = 1 << 60;

/// The memory a run may use and where that figure comes from, for the refusal's text.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryBudget {
    pub bytes: f64,
    /// e.g. "the address-space limit (RLIMIT_AS) leaves", "MemAvailable is".
    pub whose: String,
}

/// The memory a run may use ([`MemoryBudget`]); `None` when nothing is known (no check).
/// `base_bytes` is the estimate's share for the engine and the Python front, already
/// resident and so already inside the process's address space.
pub fn memory_budget(base_bytes: f64) -> Result<Option<MemoryBudget>, String> {
    if let Ok(v) = std::env::var("SOJOURN_MEMORY") {
        let b = units::parse_bytes(&v)
            .map_err(|m| format!("environment variable SOJOURN_MEMORY: {m}"))?;
        return Ok(Some(MemoryBudget {
            bytes: b as f64,
            whose: "SOJOURN_MEMORY allows".into(),
        }));
    }
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let mut figures = Vec::new();
    if let (Some(limit), Some(status)) = (
        read("/proc/self/limits").and_then(|t| address_space_limit(&t)),
        read("/proc/self/status"),
    ) {
        let spans = status_kib(&status, "VmSize:").unwrap_or(0) as f64 * 1024.0;
        figures.push(MemoryBudget {
            bytes: address_space_left(limit as f64, spans, base_bytes),
            whose: format!(
                "the address-space limit (RLIMIT_AS {}, {} already mapped) leaves",
                gb(limit as f64),
                gb(spans)
            ),
        });
    }
    if let Some(text) = read("/proc/self/cgroup") {
        if let Some(b) = cgroup_limit(&text, read) {
            figures.push(MemoryBudget {
                bytes: b as f64,
                whose: "the cgroup's memory limit (memory.max) is".into(),
            });
        }
    }
    if let Some(kib) = read("/proc/meminfo").and_then(|t| status_kib(&t, "MemAvailable:")) {
        figures.push(MemoryBudget {
            bytes: kib as f64 * 1024.0,
            whose: "this machine has available (MemAvailable)".into(),
        });
    }
    Ok(figures
        .into_iter()
        .min_by(|a, b| a.bytes.total_cmp(&b.bytes)))
}

/// What an address-space limit leaves a run: the limit, less what the process already
/// maps, less what a run reserves untouched ([`RESERVED_ADDRESS_SPACE_BYTES`]), plus the
/// estimate's base share (resident already, so counted in `spans` and in the estimate).
pub fn address_space_left(limit: f64, spans: f64, base_bytes: f64) -> f64 {
    (limit - spans - RESERVED_ADDRESS_SPACE_BYTES + base_bytes).max(0.0)
}

/// The soft `RLIMIT_AS` in bytes from `/proc/self/limits` (`Max address space  4294967296
/// 4294967296  bytes`); `None` when unlimited or absent.
pub fn address_space_limit(limits: &str) -> Option<u64> {
    let rest = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max address space"))?;
    rest.split_whitespace().next()?.parse().ok()
}

/// A `Key:   123 kB` field of `/proc/self/status` or `/proc/meminfo`, in KiB.
pub fn status_kib(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|r| r.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The memory limit of the cgroup in `/proc/self/cgroup` (`text`), the smallest along
/// its path up to the root, as a cgroup's own limit is bounded by its ancestors': v2
/// (`0::/path`, `memory.max`, "max" = none) under `/sys/fs/cgroup` or, on a hybrid
/// layout, `/sys/fs/cgroup/unified`; v1 (`N:memory:/path`, `memory.limit_in_bytes`).
/// `read` returns a file's text. `None` when no limit is set.
pub fn cgroup_limit(text: &str, read: impl Fn(&str) -> Option<String>) -> Option<u64> {
    let mut best: Option<u64> = None;
    let mut take = |v: u64| best = Some(best.map_or(v, |b| b.min(v)));
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (roots, file): (&[&str], &str) = if id == "0" && controllers.is_empty() {
            (&["/sys/fs/cgroup", "/sys/fs/cgroup/unified"], "memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            (&["/sys/fs/cgroup/memory"], "memory.limit_in_bytes")
        } else {
            continue;
        };
        for root in roots {
            let mut dir = path.trim_end_matches('/').to_string();
            loop {
                if let Some(v) = read(&format!("{root}{dir}/{file}")) {
                    let v = v.trim();
                    if let Ok(b) = v.parse::<u64>() {
                        if b < CGROUP_V1_UNLIMITED {
                            take(b);
                        }
                    }
                }
                match dir.rfind('/') {
                    Some(i) => dir.truncate(i),
                    None => break,
                }
            }
        }
    }
    best
}

/// Bytes as the refusals print them: `7.7 GB`.
pub fn gb(b: f64) -> String {
    format!("{:.1} GB", b / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn address_space_limit_from_proc_limits() {
        let limited = "Limit                     Soft Limit           Hard Limit           Units     \n\
                       Max stack size            8388608              unlimited            bytes     \n\
                       Max address space         4294967296           4294967296           bytes     \n";
        assert_eq!(address_space_limit(limited), Some(4_294_967_296));
        let unlimited =
            "Max address space         unlimited            unlimited            bytes     \n";
        assert_eq!(address_space_limit(unlimited), None);
        assert_eq!(address_space_limit(""), None);
    }

    #[test]
    fn kib_fields() {
        let meminfo = "MemTotal:       24684084 kB\nMemFree:        17000000 kB\nMemAvailable:   24032044 kB\n";
        assert_eq!(status_kib(meminfo, "MemAvailable:"), Some(24_032_044));
        assert_eq!(
            status_kib("VmPeak:\t  600000 kB\nVmSize:\t  576512 kB\n", "VmSize:"),
            Some(576_512)
        );
        assert_eq!(status_kib(meminfo, "VmSize:"), None);
    }

    #[test]
    fn address_space_left_counts_what_is_mapped_and_reserved() {
        // 4 GiB limit, 563 MiB mapped, 1 GiB reserved by a run, 128 MiB base already
        // resident: 4096 − 563 − 1024 + 128 = 2637 MiB.
        let mib = 1024.0 * 1024.0;
        assert_eq!(
            address_space_left(4096.0 * mib, 563.0 * mib, 128.0 * mib),
            2637.0 * mib
        );
        assert_eq!(address_space_left(512.0 * mib, 563.0 * mib, 0.0), 0.0);
    }

    fn files(entries: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |p: &str| m.get(p).cloned()
    }

    #[test]
    fn cgroup_v2_limit_is_the_smallest_up_to_the_root() {
        let read = files(&[
            ("/sys/fs/cgroup/user.slice/job/memory.max", "max\n"),
            ("/sys/fs/cgroup/user.slice/memory.max", "2147483648\n"),
        ]);
        assert_eq!(
            cgroup_limit("0::/user.slice/job\n", &read),
            Some(2_147_483_648)
        );
        let none = files(&[("/sys/fs/cgroup/a/memory.max", "max\n")]);
        assert_eq!(cgroup_limit("0::/a\n", &none), None);
    }

    #[test]
    fn cgroup_v1_memory_controller_and_its_unlimited_value() {
        let text = "9:name=systemd:/\n4:memory:/process_api/x\n0::/\n";
        let unlimited = files(&[(
            "/sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes",
            "9223372036854771712\n",
        )]);
        assert_eq!(cgroup_limit(text, &unlimited), None);
        let limited = files(&[
            (
                "/sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                "/sys/fs/cgroup/memory/process_api/memory.limit_in_bytes",
                "1073741824\n",
            ),
        ]);
        assert_eq!(cgroup_limit(text, &limited), Some(1_073_741_824));
    }

    #[test]
    fn cgroup_hybrid_layout_reads_the_unified_mount() {
        let read = files(&[("/sys/fs/cgroup/unified/svc/memory.max", "536870912")]);
        assert_eq!(cgroup_limit("0::/svc\n", &read), Some(536_870_912));
    }
}
