//! Capture and inject: frames received in batches from the AF_PACKET ports into pool
//! slots, parsed into `Packet`s (a GSO buffer's virtio header included), routed to their
//! first link; released frames written to their egress port with the right MACs.

use super::pool::SLOT_BITS;
use super::{clock_ns, Forwarder, Hop, PortPlan, PortReport};
use crate::afpacket::{PacketSocket, MAX_BATCH};
use crate::wire;
use sojourn_core::Time;
use std::collections::VecDeque;
use std::net::IpAddr;

pub(super) struct Port {
    pub(super) plan: PortPlan,
    pub(super) sock: PacketSocket,
    /// Slots posted for the next receive.
    pub(super) rx_slots: Vec<u32>,
    /// Frames released to this port, not yet sent.
    pub(super) tx: VecDeque<u32>,
    pub(super) rep: PortReport,
}

impl Forwarder {
    /// Longest-prefix match, routes for this ingress before ingress-agnostic ones.
    pub(super) fn route(&self, from: Hop, dst: IpAddr) -> Option<usize> {
        let mut best: Option<(u8, bool, usize)> = None;
        for r in &self.routes {
            let specific = match r.ingress {
                None => false,
                Some(h) if h == from => true,
                Some(_) => continue,
            };
            if !prefix_matches(r.prefix, r.prefix_len, dst) {
                continue;
            }
            let cand = (r.prefix_len, specific, r.link);
            if best.is_none_or(|b| (cand.0, cand.1) > (b.0, b.1)) {
                best = Some(cand);
            }
        }
        best.map(|b| b.2)
    }
    /// Handles one received frame in slot `slot` from port `pi`.
    pub(super) fn ingress(&mut self, pi: usize, slot: u32, len: u32, now: Time) {
        let port = &mut self.ports[pi];
        port.rep.rx_frames += 1;
        port.rep.rx_bytes += len as u64;
        self.pool.lens[slot as usize] = len;
        if (len as usize) < self.pool.hdr {
            self.ingress.not_ip += 1;
            self.pool.release(slot);
            return;
        }
        let Some(h) = wire::parse(self.pool.frame(slot)) else {
            self.ingress.not_ip += 1;
            self.pool.release(slot);
            return;
        };
        if let Some((syn_ack, setup)) = wire::ecn_setup(&h) {
            let c = &mut self.ecn_handshakes;
            let row = if syn_ack { &mut c.syn_ack } else { &mut c.syn };
            row[setup as usize] += 1;
        }
        let Some(li) = self.route(Hop::Port(pi), h.dst) else {
            self.ingress.unroutable += 1;
            self.pool.release(slot);
            return;
        };
        let frame_len = len - self.pool.hdr as u32;
        let mut p = wire::packet(&h, frame_len);
        if self.pool.hdr > 0 {
            // A GSO buffer (virtio_net_hdr: gso_type at byte 1, gso_size at bytes 4..6, in
            // host byte order): the qdisc sees its wire size — every segment with its own
            // copy of the headers — and its segment count, as the simulator's GSO
            // buffers (Packet::gso_segs).
            let raw = self.pool.raw(slot);
            let gso_type = raw[1] & !VIRTIO_NET_HDR_GSO_ECN;
            let gso_size = u16::from_ne_bytes([raw[4], raw[5]]) as u32;
            if gso_type != 0 && gso_size > 0 && h.payload_bytes > gso_size {
                let headers = frame_len - h.payload_bytes;
                let segs = h.payload_bytes.div_ceil(gso_size);
                p.len_bytes = h.payload_bytes + segs * headers;
                p.gso_segs = segs.min(u16::MAX as u32) as u16;
                p.gso_size = gso_size as u16;
                p.truesize_bytes = sojourn_core::packet::truesize_for(frame_len);
                self.ports[pi].rep.rx_gso_buffers += 1;
            }
        }
        p.uid = (self.next_uid << SLOT_BITS) | slot as u64;
        self.next_uid += 1;
        p.hash = p.key.hash(self.hash_salt);
        p.created_at = now;
        let (flow, original) = self.flows.lookup(p.key, h.tcp_flags, now.as_ns());
        p.tag = flow as u64;
        if let Some(ct) = &mut self.conntrack {
            p.ct_bytes = ct.account(&p, original);
        }
        self.enqueue(li, p, now);
    }
    pub(super) fn send_to_port(&mut self, pi: usize, slot: u32) {
        let port = &mut self.ports[pi];
        let f = self.pool.frame_mut(slot);
        let dst = if port.plan.neighbours.is_empty() {
            port.plan.peer_mac
        } else {
            wire::parse(f)
                .and_then(|h| {
                    port.plan
                        .neighbours
                        .iter()
                        .find(|(a, _)| *a == h.dst)
                        .map(|n| n.1)
                })
                .unwrap_or(port.plan.peer_mac)
        };
        wire::rewrite_macs(f, port.plan.mac.0, dst.0);
        port.tx.push_back(slot);
    }
    /// Sends what is queued on every port. Returns an error only for a broken socket.
    pub(super) fn flush(&mut self) -> Result<(), String> {
        for port in &mut self.ports {
            while !port.tx.is_empty() {
                let n = port.tx.len().min(MAX_BATCH);
                let frames: Vec<&[u8]> =
                    port.tx.iter().take(n).map(|&s| self.pool.raw(s)).collect();
                let (sent, failed, err) = port.sock.send_batch(&frames);
                for _ in 0..sent + failed {
                    let s = port.tx.pop_front().unwrap();
                    port.rep.tx_bytes += self.pool.lens[s as usize] as u64;
                    self.pool.free.push(s);
                }
                // tx_bytes counted refused frames too; take them back out is not worth it:
                // count frames exactly, bytes approximately on errors.
                port.rep.tx_frames += sent as u64;
                port.rep.tx_errors += failed as u64;
                if let Some(e) = err {
                    return Err(format!("send on {}: {e}", port.plan.ifname));
                }
                if sent + failed < n {
                    break; // EAGAIN: retry on the next round
                }
            }
        }
        Ok(())
    }
    /// Receives everything waiting on port `pi` (batches until empty). Returns frames.
    pub(super) fn receive(&mut self, pi: usize) -> Result<usize, String> {
        let mut total = 0;
        loop {
            let port = &mut self.ports[pi];
            while port.rx_slots.len() < MAX_BATCH {
                match self.pool.alloc() {
                    Some(s) => port.rx_slots.push(s),
                    None => break,
                }
            }
            if port.rx_slots.is_empty() {
                // No buffer at all: read and drop one frame so the socket does not stall.
                let mut scratch = [0u8; 64];
                let ptrs = [scratch.as_mut_ptr()];
                let (mut l, mut tr, mut st) = ([0u32; 1], [false; 1], [0u64; 1]);
                // SAFETY: scratch is a live local buffer of 64 bytes.
                let n = unsafe { port.sock.recv_batch(&ptrs, 64, &mut l, &mut tr, &mut st) }
                    .map_err(|e| format!("receive on {}: {e}", port.plan.ifname))?;
                if n == 0 {
                    return Ok(total);
                }
                port.rep.rx_frames += 1;
                self.ingress.no_buffer += 1;
                total += 1;
                continue;
            }
            let mut ptrs = [std::ptr::null_mut::<u8>(); MAX_BATCH];
            let k = port.rx_slots.len();
            for (i, &s) in port.rx_slots.iter().enumerate() {
                ptrs[i] = self.pool.ptr(s);
            }
            let port = &mut self.ports[pi];
            let mut lens = [0u32; MAX_BATCH];
            let mut trunc = [false; MAX_BATCH];
            let mut stamps = [0u64; MAX_BATCH];
            // SAFETY: each pointer is a distinct pool slot of slot_bytes bytes that only
            // this port's posted list owns until the frames are taken below.
            let n = unsafe {
                port.sock.recv_batch(
                    &ptrs[..k],
                    self.pool.slot_bytes,
                    &mut lens,
                    &mut trunc,
                    &mut stamps,
                )
            }
            .map_err(|e| format!("receive on {}: {e}", port.plan.ifname))?;
            if n == 0 {
                return Ok(total);
            }
            let now = self.now();
            // The kernel's receive times are CLOCK_REALTIME; the run's clock is
            // CLOCK_MONOTONIC from `epoch`. Their offset now converts them (they advance
            // alike over the milliseconds a frame can wait in the socket).
            let real_at_epoch = clock_ns(libc::CLOCK_REALTIME).saturating_sub(now.as_ns());
            // Take the filled slots (the first n posted) off the posted list.
            let filled: Vec<u32> = self.ports[pi].rx_slots.drain(..n).collect();
            for (i, slot) in filled.into_iter().enumerate() {
                if trunc[i] {
                    let port = &mut self.ports[pi];
                    port.rep.rx_frames += 1;
                    port.rep.rx_bytes += lens[i] as u64;
                    self.ingress.oversize += 1;
                    self.pool.release(slot);
                    continue;
                }
                // A frame enters its link when it reached the port, not when this
                // thread read it: a thread held up (by the CPU's other work, or by the
                // kernel's real-time throttling) would otherwise leave the emulated link
                // idle meanwhile, and then meet a burst its queue cannot hold — lost link
                // time and extra drops at high rates. Without a stamp: now.
                let arrived = match stamps[i].checked_sub(real_at_epoch) {
                    Some(t) if stamps[i] != 0 => Time(t).min(now),
                    _ => now,
                };
                self.ingress(pi, slot, lens[i], arrived);
            }
            total += n;
            if n < k {
                return Ok(total);
            }
        }
    }
}

/// `virtio_net_hdr` (include/uapi/linux/virtio_net.h): flags, gso_type, hdr_len,
/// gso_size, csum_start, csum_offset.
pub(super) const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;

pub(super) fn prefix_matches(prefix: IpAddr, len: u8, a: IpAddr) -> bool {
    match (prefix, a) {
        (IpAddr::V4(p), IpAddr::V4(a)) => {
            let len = len.min(32) as u32;
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            (u32::from(p) & mask) == (u32::from(a) & mask)
        }
        (IpAddr::V6(p), IpAddr::V6(a)) => {
            let len = len.min(128) as u32;
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            (u128::from(p) & mask) == (u128::from(a) & mask)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_match_like_a_routing_table() {
        let a: IpAddr = "10.0.2.7".parse().unwrap();
        assert!(prefix_matches("10.0.2.0".parse().unwrap(), 24, a));
        assert!(!prefix_matches("10.0.3.0".parse().unwrap(), 24, a));
        assert!(prefix_matches("0.0.0.0".parse().unwrap(), 0, a));
        let b: IpAddr = "fd00:0:0:2::7".parse().unwrap();
        assert!(prefix_matches("fd00:0:0:2::".parse().unwrap(), 64, b));
        assert!(!prefix_matches("fd00:0:0:3::".parse().unwrap(), 64, b));
        assert!(!prefix_matches("10.0.2.0".parse().unwrap(), 24, b));
    }
}
