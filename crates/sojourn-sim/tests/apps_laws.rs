//! Thin UDP streams over IPv6 (opened by the engine in `workload.rs`, sent by `udp.rs`'s
//! `ThinUdpSource`; `tcp/apps.rs` before issue 41), pinned by mutation testing
//! (docs/testing.md, "Scores (session 7)"): header arithmetic. Truths: the IPv6 header is
//! 40 B (RFC 8200 §3), the UDP header 8 B (RFC 768), the Ethernet header 14 B; a datagram's
//! payload is at most MTU − 48 B over IPv6 (MTU − 28 B over IPv4), and its frame is
//! payload + 62 B (payload + 42 B over IPv4).

mod tcp_common;
use tcp_common::*;

use sojourn_sim::run_toml;

/// One thin UDP stream a → b on a 2 Mbit/s, 50-ms link, IP version `ip`, messages of
/// `message` bytes every 100 ms for 1.05 s (messages at 0, 0.1, …, 1.0 s: 11).
fn thin_udp(ip: u32, message: u32) -> sojourn_sim::RunOutput {
    run_toml(&format!(
        r#"
        duration = "1.05s"
        [transport]
        ip = {ip}
        [topology]
        kind = "graph"
        nodes = ["a", "b"]
        [[topology.links]]
        from = "a"
        to = "b"
        rate = "2Mbit"
        delay = "50ms"
        [[workload]]
        kind = "thin"
        transport = "udp"
        from = "a"
        to = "b"
        message_size = "{message}B"
        interval = "100ms"
        "#
    ))
    .unwrap()
}

/// A 2920-B message over IPv6 with the 1500-B MTU is 1452 + 1452 + 16 B of payload: three
/// datagrams (over IPv4, 1472 + 1448: two). The third leaves after all three frames
/// (1514 + 1514 + 78 B) are serialised at 2 Mbit/s: 50 + 3106·8/2e6 s = 62.424 ms.
#[test]
fn an_ipv6_thin_udp_message_is_split_at_mtu_minus_48() {
    let v6 = thin_udp(6, 2920);
    assert_eq!(col_u64(&v6.flows, "pkts_sent")[0], 11 * 3);
    let d = col_f64(&v6.flows, "max_delay_ms")[0];
    assert!((d - 62.424).abs() < 1e-6, "max delay {d} ms");
    let v4 = thin_udp(4, 2920);
    assert_eq!(col_u64(&v4.flows, "pkts_sent")[0], 11 * 2);
}

/// A 100-B message over IPv6 is one 162-B frame (100 + 8 + 40 + 14): 50 ms + 162·8/2e6 s
/// = 50.648 ms on the idle link; over IPv4 142 B: 50.568 ms.
#[test]
fn an_ipv6_thin_udp_frame_carries_62_bytes_of_headers() {
    let d6 = col_f64(&thin_udp(6, 100).flows, "max_delay_ms")[0];
    assert!((d6 - 50.648).abs() < 1e-6, "IPv6 delay {d6} ms");
    let d4 = col_f64(&thin_udp(4, 100).flows, "max_delay_ms")[0];
    assert!((d4 - 50.568).abs() < 1e-6, "IPv4 delay {d4} ms");
}
