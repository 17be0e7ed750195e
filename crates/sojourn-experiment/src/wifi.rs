//! `[topology] kind = "wifi"`: the medium's keys and stations (the nodes and links are
//! built by `experiment::parse_wifi`, beside the other topologies, so this module does not
//! import the experiment: the model has no import circle). An access point and its
//! stations on one 802.11 channel,
//! a wired uplink (`wan`) behind the AP to a gateway, and servers behind the gateway
//! (docs/wifi.md).
//!
//! Nodes: `gw`, `ap`, `server{j}` (`servers`, default 1), `sta{i}` (one per station,
//! `count` replicates an entry). Links: `wan.down` (gw → ap), `wan.up` (ap → gw),
//! `server{j}.out`/`server{j}.in` (server ↔ gw, `server_access`, default 10 Gbit/s),
//! and per station `sta{i}.down` (ap → sta) and `sta{i}.up` (sta → ap), the directions
//! of the shared medium; these are added last, so they are the experiment's highest link
//! ids. `pair = i` in a workload is (`server{i mod servers}`, `sta{i}`): a download.

use sojourn_core::params::{ConfError, ConfResult, Params, Value};
use sojourn_core::time::Time;
use sojourn_core::wifi::{Mac, PhyRate, Rate, Standard, StationConfig, WifiConfig};
use sojourn_core::Duration;

/// The medium of a wifi topology, for the engines.
#[derive(Clone, Debug)]
pub struct WifiPlan {
    pub config: WifiConfig,
    pub stations: Vec<StationConfig>,
    pub ap: u32,
    /// Node of each station.
    pub station_nodes: Vec<u32>,
    /// The first medium link: `sta{i}.down` is `first_link + 2i`, `sta{i}.up` one more.
    pub first_link: u32,
}

impl WifiPlan {
    /// The medium direction and station of link `l`, if it is a medium link.
    pub fn link_role(&self, l: u32) -> Option<(sojourn_core::wifi::Dir, usize)> {
        let k = l.checked_sub(self.first_link)? as usize;
        if k >= 2 * self.stations.len() {
            return None;
        }
        let dir = if k.is_multiple_of(2) {
            sojourn_core::wifi::Dir::Down
        } else {
            sojourn_core::wifi::Dir::Up
        };
        Some((dir, k / 2))
    }
}

/// Bytes of one entry of mac80211's flow table as the core holds it (a flow's queue
/// header, backlog, deficit, owner and CoDel state: 96 B on x86-64, budgeted at 128).
pub const BYTES_PER_FQ_FLOW: f64 = 128.0;

/// The medium's memory beyond its packets: a flow table per transmitter (the AP and every
/// station) in the fq modes.
pub fn memory_bytes(plan: &WifiPlan) -> f64 {
    if plan.config.mac == Mac::Fifo {
        return 0.0;
    }
    (plan.stations.len() + 1) as f64
        * (plan.config.fq_flows as f64 + plan.stations.len() as f64)
        * BYTES_PER_FQ_FLOW
}

/// Reads a `rate_schedule` value at a key path into `(from, rate_bps)` steps.
pub(crate) type RateSchedule = dyn Fn(&Value, &str) -> ConfResult<Vec<(Time, u64)>>;

/// The medium's keys of `[topology]` and its `[[topology.stations]]`; `schedule` reads a
/// station's `rate_schedule` (the experiment's schedule grammar).
pub(crate) fn parse_medium(
    p: &mut Params,
    schedule: &RateSchedule,
) -> ConfResult<(WifiConfig, Vec<StationConfig>)> {
    let config = parse_config(p)?;
    let stations = parse_stations(p, schedule)?;
    Ok((config, stations))
}

fn parse_config(p: &mut Params) -> ConfResult<WifiConfig> {
    let d = WifiConfig::default();
    let mac = p.choice("mac", &Mac::NAMES, d.mac.name())?;
    let mac = Mac::parse(mac).expect("one of the names");
    let aql = p.bool("aql", d.aql)?;
    if aql && mac == Mac::Fifo && p.has("aql") {
        return Err(p.err(
            "aql",
            "AQL is part of mac80211's TXQs: not with mac = \"fifo\"",
        ));
    }
    let aql_low_us = duration_us(p, "aql_low", d.aql_low_us)?;
    let aql_high_us = duration_us(p, "aql_high", d.aql_high_us)?;
    let aql_threshold_us = duration_us(p, "aql_threshold", d.aql_threshold_us)?;
    if aql_low_us > aql_high_us {
        return Err(p.err("aql_low", "must not be above aql_high"));
    }
    let ampdu_max_frames = p.u32("ampdu_frames", d.ampdu_max_frames, 1, 256)?;
    let ampdu_max_bytes = p.u64("ampdu_bytes", 0, 0, 6_500_631)?;
    let ampdu_max_airtime = p.duration("ampdu_airtime", d.ampdu_max_airtime)?;
    if ampdu_max_airtime.is_zero() || ampdu_max_airtime > Duration::from_ms(10) {
        return Err(p.err(
            "ampdu_airtime",
            "must be above 0 and at most 10ms (the PPDU limit is 5.484 ms)",
        ));
    }
    Ok(WifiConfig {
        mac,
        aql: aql && mac != Mac::Fifo,
        aql_low_us,
        aql_high_us,
        aql_threshold_us,
        ampdu_max_frames,
        ampdu_max_bytes,
        ampdu_max_airtime,
        qdisc_limit_packets: p.u32("qdisc_limit", d.qdisc_limit_packets, 1, 1_000_000)?,
        driver_queue_packets: p.u32("driver_queue", d.driver_queue_packets, 1, 1_000_000)?,
        fq_flows: p.u32("fq_flows", d.fq_flows, 1, 65_536)?,
        fq_limit_packets: p.u32("fq_limit", d.fq_limit_packets, 1, 1_000_000)?,
        retry_limit: p.u32("retry_limit", d.retry_limit as u32, 0, 255)? as u8,
        collisions: p.bool("collisions", d.collisions)?,
        slow_station_codel: p.bool("slow_station_codel", d.slow_station_codel)?,
    })
}

fn duration_us(p: &mut Params, key: &str, default_us: u64) -> ConfResult<u64> {
    let d = p.duration(key, Duration::from_us(default_us))?;
    if d.is_zero() {
        return Err(p.err(key, "must be positive"));
    }
    Ok(d.as_ns() / 1000)
}

fn parse_stations(p: &mut Params, schedule: &RateSchedule) -> ConfResult<Vec<StationConfig>> {
    let entries = match p.raw("stations") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(Value::Array(_)) | None => {
            return Err(p.err(
                "stations",
                "required: [[topology.stations]] entries (e.g. mcs = 7, streams = 2)",
            ))
        }
        Some(v) => {
            return Err(p.err(
                "stations",
                format!("expected a list of station tables, got {}", v.type_name()),
            ))
        }
    };
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let path = format!("topology.stations[{i}]");
        let Value::Table(t) = e else {
            return Err(ConfError::new(path, "expected a table"));
        };
        let mut sp = Params::new(path.clone(), t);
        let count = sp.u32("count", 1, 1, 1000)?;
        let rate = parse_rate(&mut sp)?;
        let mut rates = vec![(Time::ZERO, rate)];
        if let Some(v) = sp.raw("rate_schedule") {
            if !matches!(rate, Rate::Fixed(_)) {
                return Err(sp.err("rate_schedule", "needs a fixed `rate` (not an MCS)"));
            }
            let steps = schedule(v, &sp.key_path("rate_schedule"))?;
            if steps.iter().any(|&(_, r)| r == 0) {
                return Err(sp.err("rate_schedule", "rates must be positive"));
            }
            rates.extend(steps.into_iter().map(|(t, r)| (t, Rate::Fixed(r))));
        }
        let loss = sp.f64_in("loss", 0.0, 0.0, 0.99)?;
        let weight_us = sp.u32(
            "weight",
            sojourn_core::wifi::airtime::DEFAULT_AIRTIME_WEIGHT_US,
            1,
            1_000_000,
        )?;
        sp.finish()?;
        for _ in 0..count {
            out.push(StationConfig {
                rates: rates.clone(),
                loss,
                weight_us,
            });
        }
    }
    if out.len() > 1000 {
        return Err(p.err("stations", "at most 1000 stations"));
    }
    Ok(out)
}

/// `rate = "54Mbit"` (fixed) or `mcs = 7` with `standard`, `width`, `streams`, `gi`.
fn parse_rate(p: &mut Params) -> ConfResult<Rate> {
    let fixed = p.rate_opt("rate")?;
    let has_mcs = p.has("mcs");
    match (fixed, has_mcs) {
        (Some(_), true) => Err(p.err("rate", "give either `rate` or `mcs`, not both")),
        (None, false) => Err(p.err(
            "mcs",
            "required: `mcs` (with standard, width, streams, gi) or a fixed `rate`",
        )),
        (Some(0), _) => Err(p.err("rate", "must be positive")),
        (Some(r), false) => {
            p.accepts(&["standard", "width", "streams", "gi"]);
            Ok(Rate::Fixed(r))
        }
        (None, true) => {
            let standard = match p.choice("standard", &["ht", "vht", "he"], "ht")? {
                "ht" => Standard::Ht,
                "vht" => Standard::Vht,
                _ => Standard::He,
            };
            let mcs = p.u32("mcs", 0, 0, 11)? as u8;
            let width_mhz = p.u32("width", 20, 1, 1000)?;
            let streams = p.u32("streams", 1, 1, 8)? as u8;
            let gi_default = if standard == Standard::He {
                "0.8us"
            } else {
                "long"
            };
            let gi_ns = match p.str_opt("gi")?.unwrap_or(gi_default) {
                "long" | "0.8us" => 800,
                "short" | "0.4us" => 400,
                "1.6us" => 1600,
                "3.2us" => 3200,
                other => {
                    return Err(p.err(
                        "gi",
                        format!("{other:?}: expected \"long\", \"short\", \"0.8us\", \"0.4us\", \"1.6us\" or \"3.2us\""),
                    ))
                }
            };
            let phy = PhyRate {
                standard,
                width_mhz,
                mcs,
                streams,
                gi_ns,
            };
            phy.validate().map_err(|m| p.err("mcs", m))?;
            Ok(Rate::Phy(phy))
        }
    }
}
