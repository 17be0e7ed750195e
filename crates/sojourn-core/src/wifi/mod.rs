//! Wi-Fi: one 802.11 channel shared by an access point and its stations, with mac80211's
//! queueing (docs/wifi.md). Sans-IO like [`crate::device`]: the simulator and a live
//! forwarder drive the same [`medium::Medium`].
//!
//! - [`phy`]: MCS data rates (802.11n/ac/ax), PPDU durations, EDCA and block-ack timing;
//! - [`fq`]: mac80211's FQ-CoDel TXQs over one shared flow table;
//! - [`airtime`]: the airtime deficit round robin and Airtime Queue Limits;
//! - [`medium`]: the transmitters, contention, aggregation, loss and retries.

pub mod airtime;
pub mod fq;
pub mod medium;
pub mod phy;

pub use medium::{Dir, Mac, Medium, MediumStats, Rate, StationConfig, StationStats, WifiConfig};
pub use phy::{PhyRate, Standard};
