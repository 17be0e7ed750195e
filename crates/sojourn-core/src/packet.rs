//! Packets as the qdiscs and the simulator see them: small plain `Copy` structs, no heap.

use crate::time::Time;

/// IP ECN codepoint (RFC 3168 §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Ecn {
    #[default]
    NotEct = 0,
    Ect1 = 1,
    Ect0 = 2,
    Ce = 3,
}

impl Ecn {
    /// True for ECT(0), ECT(1) and CE: the packet's transport understands ECN.
    #[inline]
    pub fn is_capable(self) -> bool {
        self != Ecn::NotEct
    }
}

/// IP protocol numbers used by sojourn.
pub mod proto {
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
}

/// An IP address, IPv4 or IPv6, in one 16-byte value: an IPv6 address as its 128 bits, an
/// IPv4 address as the IPv4-mapped IPv6 address `::ffff:a.b.c.d` (RFC 4291 §2.5.5.2), so
/// one type holds both without a tag and compares like the bytes on the wire.
///
/// The simulator numbers its nodes and gives node `n` the IPv4 address whose 32 bits are
/// `n` ([`Addr::v4`]); a live engine reads real addresses from packets.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Addr([u32; 4]);

impl Addr {
    /// The IPv4 address with these 32 bits (`a.b.c.d` = `a << 24 | b << 16 | c << 8 | d`).
    #[inline]
    pub const fn v4(bits: u32) -> Addr {
        Addr([0, 0, 0xffff, bits])
    }

    /// The IPv6 address with these 16 bytes (network order).
    pub const fn v6(octets: [u8; 16]) -> Addr {
        let mut w = [0u32; 4];
        let mut i = 0;
        while i < 4 {
            w[i] = u32::from_be_bytes([
                octets[4 * i],
                octets[4 * i + 1],
                octets[4 * i + 2],
                octets[4 * i + 3],
            ]);
            i += 1;
        }
        Addr(w)
    }

    /// The 16 bytes in network order (an IPv4 address as `::ffff:a.b.c.d`).
    pub fn octets(&self) -> [u8; 16] {
        let mut o = [0u8; 16];
        for (i, w) in self.0.iter().enumerate() {
            o[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
        }
        o
    }

    #[inline]
    pub fn is_v4(&self) -> bool {
        // One 64-bit and one 32-bit comparison (the `::ffff:0:0/96` prefix).
        (self.0[0] | self.0[1]) == 0 && self.0[2] == 0xffff
    }

    /// The 32 bits of an IPv4 address, `None` for IPv6.
    #[inline]
    pub fn v4_bits(&self) -> Option<u32> {
        self.is_v4().then_some(self.0[3])
    }

    /// The last 32 bits: the whole address for IPv4 (the simulator's node id).
    #[inline]
    pub fn low32(&self) -> u32 {
        self.0[3]
    }

    /// 64 bits standing for the address in hashes: the IPv4 bits themselves, or the
    /// 128 bits of an IPv6 address mixed down.
    #[inline]
    fn fold64(&self) -> u64 {
        match self.v4_bits() {
            Some(b) => b as u64,
            None => {
                let hi = ((self.0[0] as u64) << 32) | self.0[1] as u64;
                let lo = ((self.0[2] as u64) << 32) | self.0[3] as u64;
                crate::rng::splitmix64_mix(hi ^ crate::rng::splitmix64_mix(lo))
            }
        }
    }
}

impl From<std::net::IpAddr> for Addr {
    fn from(a: std::net::IpAddr) -> Addr {
        match a {
            std::net::IpAddr::V4(v4) => Addr::v4(u32::from(v4)),
            std::net::IpAddr::V6(v6) => Addr::v6(v6.octets()),
        }
    }
}

impl From<Addr> for std::net::IpAddr {
    fn from(a: Addr) -> std::net::IpAddr {
        match a.v4_bits() {
            Some(b) => std::net::IpAddr::V4(b.into()),
            None => std::net::IpAddr::V6(a.octets().into()),
        }
    }
}

impl std::fmt::Debug for Addr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&std::net::IpAddr::from(*self), f)
    }
}

impl std::fmt::Display for Addr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&std::net::IpAddr::from(*self), f)
    }
}

/// The 5-tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct FlowKey {
    pub src_addr: Addr,
    pub dst_addr: Addr,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
}

impl FlowKey {
    /// The reverse direction of the same conversation.
    pub fn reversed(&self) -> FlowKey {
        FlowKey {
            src_addr: self.dst_addr,
            dst_addr: self.src_addr,
            src_port: self.dst_port,
            dst_port: self.src_port,
            proto: self.proto,
        }
    }

    /// A symmetric 32-bit flow hash, like the kernel's flow-dissector hash
    /// (`__flow_hash_consistentify`): the endpoints are ordered by (address, port) first,
    /// so both directions of a connection hash alike, for IPv4 and IPv6 alike; a per-run
    /// `salt` plays the role of the per-boot random seed. Mixing is a 64-bit finaliser
    /// (splitmix64), good enough for multiply-shift bucket selection.
    #[inline]
    pub fn hash(&self, salt: u64) -> u32 {
        if let (Some(s), Some(d)) = (self.src_addr.v4_bits(), self.dst_addr.v4_bits()) {
            let a = ((s as u64) << 16) | self.src_port as u64;
            let b = ((d as u64) << 16) | self.dst_port as u64;
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let mut x = salt
                ^ lo.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ hi.rotate_left(29)
                ^ ((self.proto as u64) << 56);
            x = crate::rng::splitmix64_mix(x);
            return (x >> 32) as u32;
        }
        self.hash_v6(salt)
    }

    /// [`FlowKey::hash`] for IPv6 (or mixed) keys: the same ordering over the 128-bit
    /// addresses, all words mixed in. Out of line, so the IPv4 path stays small enough to
    /// inline where packets are hashed.
    #[inline(never)]
    fn hash_v6(&self, salt: u64) -> u32 {
        let a = (self.src_addr, self.src_port);
        let b = (self.dst_addr, self.dst_port);
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let mut x = salt ^ ((self.proto as u64) << 56) ^ 0x0000_6666_0000_0000;
        for w in [lo.0 .0, hi.0 .0] {
            x = crate::rng::splitmix64_mix(x ^ (((w[0] as u64) << 32) | w[1] as u64));
            x = crate::rng::splitmix64_mix(x ^ (((w[2] as u64) << 32) | w[3] as u64));
        }
        x = crate::rng::splitmix64_mix(x ^ (((lo.1 as u64) << 16) | hi.1 as u64));
        (x >> 32) as u32
    }

    /// Hash of the source host only (CAKE's host isolation).
    pub fn src_host_hash(&self, salt: u64) -> u32 {
        (crate::rng::splitmix64_mix(salt ^ 0x5A5A_0000_0000_0000 ^ self.src_addr.fold64()) >> 32)
            as u32
    }

    /// Hash of the destination host only (CAKE's host isolation).
    pub fn dst_host_hash(&self, salt: u64) -> u32 {
        (crate::rng::splitmix64_mix(salt ^ 0xA5A5_0000_0000_0000 ^ self.dst_addr.fold64()) >> 32)
            as u32
    }
}

/// TCP header flags.
pub mod tcp_flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

/// Sequence-number comparisons modulo 2^32 (RFC 1982 serial-number arithmetic, RFC 9293
/// §3.4; the kernel's `before()`/`after()`): what a discipline must use when it compares
/// sequence or acknowledgement numbers, which wrap on the wire. Only the low 32 bits of the
/// arguments count, so the simulator's unwrapped 64-bit numbers and a live engine's raw
/// 32-bit ones compare alike.
pub mod seq32 {
    /// `a` comes before `b`.
    #[inline]
    pub fn before(a: u64, b: u64) -> bool {
        ((a as u32).wrapping_sub(b as u32) as i32) < 0
    }

    /// `a` comes after `b`.
    #[inline]
    pub fn after(a: u64, b: u64) -> bool {
        before(b, a)
    }

    /// The same number modulo 2^32.
    #[inline]
    pub fn eq(a: u64, b: u64) -> bool {
        a as u32 == b as u32
    }

    /// Bytes from `a` up to `b` (`b - a` modulo 2^32).
    #[inline]
    pub fn diff(a: u64, b: u64) -> u32 {
        (b as u32).wrapping_sub(a as u32)
    }

    /// The 64-bit number whose low 32 bits are `low` nearest to `reference` (within
    /// ±2^31): how a receiver of 32-bit wire numbers unwraps them.
    #[inline]
    pub fn unwrap_near(reference: u64, low: u32) -> u64 {
        let d = low.wrapping_sub(reference as u32) as i32 as i64;
        (reference as i64).wrapping_add(d) as u64
    }
}

/// One SACK block `[start, end)` in the (unwrapped, 64-bit) sequence space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SackBlock {
    pub start: u64,
    pub end: u64,
}

/// Bit of [`TransportHeader::accecn_opt`] that says the AccECN option is present.
const ACCECN_OPT_PRESENT: u32 = 1 << 24;

/// Transport header fields the models need. The simulator's TCP keeps 64-bit sequence
/// numbers that never wrap (a documented simplification); a live engine stores the wire's
/// 32-bit numbers. Disciplines compare them with [`seq32`] either way. SACK blocks are kept
/// as on the wire (32-bit edges, RFC 2018 §3) and read unwrapped against `ack`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TransportHeader {
    /// First payload byte's sequence number (TCP), or message/datagram number (UDP).
    pub seq: u64,
    /// Cumulative acknowledgement (TCP).
    pub ack: u64,
    /// Payload bytes carried (excluding all headers).
    pub payload_bytes: u32,
    /// Advertised receive window in bytes (TCP).
    pub window: u32,
    pub flags: u8,
    pub sack_count: u8,
    /// The AE flag (bit 8 of the flags word, the former ECN-nonce bit): the most
    /// significant bit of AccECN's ACE field (RFC 9768 §3.2.2; see [`TransportHeader::ace`]).
    /// Kept out of `flags` so that every other user keeps its 8-bit flag word.
    pub ae: bool,
    /// The AccECN option's ECEB field (CE bytes, 24 bits, RFC 9768 §3.2.3) with bit 24 set
    /// when the option is present; 0 = no option. Only ECEB travels: the simulator's
    /// senders read no other field (the receiver still counts E0B and E1B). Read it with
    /// [`TransportHeader::accecn_eceb`]. Fits the header's padding: `Packet` keeps its size.
    pub accecn_opt: u32,
    /// SACK block edges, low 32 bits as on the wire (read with [`TransportHeader::sack`]).
    pub sack_wire: [[u32; 2]; 3],
    /// Sender's timestamp (TCP timestamps option TSval), echoed in `ts_ecr`.
    pub ts_val: Time,
    pub ts_ecr: Time,
}

impl TransportHeader {
    /// AccECN's 3-bit ACE field: AE, CWR, ECE from most to least significant bit
    /// (RFC 9768 §3.2.2, Figure 2).
    #[inline]
    pub fn ace(&self) -> u8 {
        ((self.ae as u8) << 2)
            | (((self.flags & tcp_flags::CWR != 0) as u8) << 1)
            | ((self.flags & tcp_flags::ECE != 0) as u8)
    }

    /// Writes the ACE field (the low 3 bits of `ace`) into AE, CWR and ECE.
    #[inline]
    pub fn set_ace(&mut self, ace: u8) {
        self.ae = ace & 4 != 0;
        self.flags &= !(tcp_flags::CWR | tcp_flags::ECE);
        self.flags |= (tcp_flags::CWR * ((ace >> 1) & 1)) | (tcp_flags::ECE * (ace & 1));
    }

    /// The AccECN option's ECEB field (CE bytes mod 2^24) if the option is present.
    #[inline]
    pub fn accecn_eceb(&self) -> Option<u32> {
        (self.accecn_opt & ACCECN_OPT_PRESENT != 0).then_some(self.accecn_opt & 0xff_ffff)
    }

    /// Attaches an AccECN option carrying `ceb` mod 2^24 as its ECEB field.
    #[inline]
    pub fn set_accecn_eceb(&mut self, ceb: u64) {
        self.accecn_opt = ACCECN_OPT_PRESENT | (ceb & 0xff_ffff) as u32;
    }

    /// SACK block `i` (< 3), unwrapped against `ack`: exact while its edges lie within
    /// 2^31 bytes of the cumulative ACK, which TCP's window (at most 2^30) guarantees.
    #[inline]
    pub fn sack(&self, i: usize) -> SackBlock {
        let [s, e] = self.sack_wire[i];
        SackBlock {
            start: seq32::unwrap_near(self.ack, s),
            end: seq32::unwrap_near(self.ack, e),
        }
    }

    /// The `sack_count` SACK blocks, in order.
    pub fn sacks(&self) -> impl Iterator<Item = SackBlock> + '_ {
        (0..(self.sack_count as usize).min(3)).map(|i| self.sack(i))
    }

    /// Sets SACK block `i` (< 3); `sack_count` is the caller's.
    #[inline]
    pub fn set_sack(&mut self, i: usize, b: SackBlock) {
        self.sack_wire[i] = [b.start as u32, b.end as u32];
    }

    /// SACK block `i` as on the wire (32-bit edges), for wrap-aware comparisons.
    #[inline]
    pub fn sack_wire(&self, i: usize) -> (u32, u32) {
        let [s, e] = self.sack_wire[i];
        (s, e)
    }
}

/// Segment `i` of a split buffer has the uid `buffer_uid + (i << SEGMENT_UID_SHIFT)`.
pub const SEGMENT_UID_SHIFT: u32 = 48;

/// What makes wire segment `index` of a GSO buffer differ from the buffer, computed once
/// per segment by [`SegmentCuts`] and written by [`Packet::apply_cut`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentCut {
    /// Position in the buffer (0 for the first).
    pub index: u32,
    /// Offset and length of the segment's payload in the buffer's payload.
    pub offset: u32,
    pub payload: u32,
    /// The segment's `len_bytes`: its payload and its own copy of the headers (the
    /// buffer's own `len_bytes` when it is not a GSO buffer).
    pub len_bytes: u32,
    /// The segment's share of the buffer's `truesize`.
    pub truesize_bytes: u32,
}

/// The cuts of a buffer's wire segments in order ([`Packet::segment_cuts`]), with what
/// every segment shares computed once per buffer: the header bytes each carries, and the
/// cumulative `truesize` share up to the previous segment's end, which is the share up to
/// this one's start (one division per segment instead of two). The cuts equal
/// [`Packet::cut_segment`]'s (issue 19, session 10: cutting was 3.3 % of seed 000).
#[derive(Clone, Copy, Debug, Default)]
pub struct SegmentCuts {
    n: u32,
    next: u32,
    size: u32,
    total: u32,
    headers: u32,
    whole_len: u32,
    truesize: u32,
    /// `truesize` share of the payload before the next segment.
    share_done: u32,
}

impl SegmentCuts {
    /// Segments not yet cut.
    #[inline]
    pub fn remaining(&self) -> u32 {
        self.n - self.next
    }

    /// The `len_bytes` of the segments not cut yet, in order, as at most three runs of
    /// equal lengths `(len_bytes, count)` (counts may be 0): the full segments, the one
    /// holding the rest of the payload, and any left without payload. What the cuts'
    /// lengths add up to, without cutting (a serialisation end, [`crate::device`]).
    pub fn remaining_lens(&self) -> [(u32, u32); 3] {
        if self.n == 1 {
            return [(self.whole_len, (self.next == 0) as u32), (0, 0), (0, 0)];
        }
        // Segment i's payload is min(size, total - min(i * size, total)) (`next_cut`):
        // `size` while i < total / size, the rest of the payload at i = total / size,
        // nothing after.
        let full = (self.total / self.size).min(self.n);
        let rest = self.total - full * self.size;
        let count_full = full.saturating_sub(self.next);
        let count_rest = (full < self.n && full >= self.next) as u32;
        let count_none = self.n.saturating_sub((full + 1).max(self.next));
        [
            (self.size + self.headers, count_full),
            (rest + self.headers, count_rest),
            (self.headers, count_none),
        ]
    }

    /// The next segment's cut, `None` after the last.
    #[inline(always)]
    pub fn next_cut(&mut self) -> Option<SegmentCut> {
        if self.next == self.n {
            return None;
        }
        let i = self.next;
        self.next += 1;
        if self.n == 1 {
            let cut = SegmentCut {
                index: 0,
                offset: 0,
                payload: self.total,
                len_bytes: self.whole_len,
                truesize_bytes: self.truesize,
            };
            return Some(cut);
        }
        // As `Packet::segment_payload`.
        let offset = (i * self.size).min(self.total);
        let payload = self.size.min(self.total - offset);
        // As `Packet::truesize_share`; this segment's start is the previous one's end.
        let end = offset + payload;
        let share_end = (self.truesize as u64 * end as u64 / self.total.max(1) as u64) as u32;
        let truesize_bytes = share_end - self.share_done;
        self.share_done = share_end;
        let cut = SegmentCut {
            index: i,
            offset,
            payload,
            len_bytes: payload + self.headers,
            truesize_bytes,
        };
        Some(cut)
    }
}

/// The fields of a GSO buffer its segments' cuts depend on ([`Packet::segment_base`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentBase {
    uid: u64,
    seq: u64,
    remaining_bytes: u64,
    enqueued_at: Time,
    total: u32,
    n: u32,
    flags: u8,
}

impl SegmentBase {
    /// Turns `seg`, which holds this buffer cut to any of its segments (the first cut a
    /// copy of the buffer, a later one cut in place by this), into the segment `cut`
    /// describes: the packet [`Packet::apply_cut`] makes of a fresh copy of the buffer.
    /// Besides the fields `apply_cut` writes, the flags it only clears are rebuilt from
    /// the buffer's, and the queueing stamp, which a hop that copied the segment on may
    /// have set in place, is the buffer's again. For a segment of a GSO buffer (`n > 1`).
    #[inline(always)]
    pub fn cut_in_place(&self, cut: &SegmentCut, seg: &mut Packet) {
        debug_assert!(self.n > 1);
        let i = cut.index;
        seg.gso_segs = 1;
        seg.gso_size = 0;
        seg.uid = self.uid.wrapping_add((i as u64) << SEGMENT_UID_SHIFT);
        seg.hdr.seq = self.seq + cut.offset as u64;
        seg.hdr.payload_bytes = cut.payload;
        seg.len_bytes = cut.len_bytes;
        seg.truesize_bytes = cut.truesize_bytes;
        seg.remaining_bytes = self.remaining_bytes + (self.total - cut.offset - cut.payload) as u64;
        seg.enqueued_at = self.enqueued_at;
        // As `apply_cut`: FIN and PSH only on the last segment, CWR only on the first.
        let mut flags = self.flags;
        if i + 1 != self.n {
            flags &= !(tcp_flags::FIN | tcp_flags::PSH);
        }
        if i > 0 {
            flags &= !tcp_flags::CWR;
        }
        seg.hdr.flags = flags;
    }
}

/// A packet. `len_bytes` is the length a Linux qdisc sees (`qdisc_pkt_len`): the L2 frame
/// including the 14-byte Ethernet header, excluding preamble and FCS.
#[derive(Clone, Copy, Debug, Default)]
pub struct Packet {
    /// Unique within a run; used for logs and the conservation check.
    pub uid: u64,
    /// Engine-owned tag, opaque to the core: the engine's own identity of this packet (the
    /// simulator packs its flow id and the receiving endpoint's id here; a forwarder its
    /// connection id). The core reads only [`Packet::conversation`], the low 32 bits.
    pub tag: u64,
    pub key: FlowKey,
    /// Symmetric flow hash (the simulator's `skb_get_hash`).
    pub hash: u32,
    pub len_bytes: u32,
    /// Kernel memory charged for the buffer (`skb->truesize`); used only by memory limits.
    pub truesize_bytes: u32,
    pub dscp: u8,
    pub ecn: Ecn,
    /// `skb->priority`: `major << 16 | minor`, set by classifiers (age-based scheduling).
    pub priority: u32,
    /// When the packet was created by its source.
    pub created_at: Time,
    /// When the current qdisc accepted it; stamped by the link before `enqueue`.
    pub enqueued_at: Time,
    /// Earliest departure time requested by the sender (EDT, `skb->tstamp`); zero if none.
    pub departure_at: Time,
    /// Sender's pacing rate in bit/s (`sk->sk_pacing_rate`, read by fq); zero if unknown.
    pub pacing_rate_bps: u64,
    /// The local socket that sent the packet (Linux `skb->sk`), as a non-zero identity the
    /// engine chooses; 0 for forwarded traffic. sch_fq keys per-socket flows by it.
    pub sk: u32,
    /// Connection-tracking byte count of this packet's connection, both directions, IP
    /// lengths, current packet included (nftables `ct bytes`), stamped by the node's
    /// conntrack hook when one is enabled; 0 otherwise. Read by age-based classifiers.
    pub ct_bytes: u64,
    /// Oracle knowledge for SRPT: payload bytes of the flow still unsent after this
    /// packet (set by senders of sized transfers; 0 when unknown or unbounded).
    pub remaining_bytes: u64,
    /// Segments in this buffer (Linux `skb_shinfo(skb)->gso_segs`): a TCP sender with GSO
    /// hands the host qdisc one buffer of up to 64 KiB, cut into `gso_size`-byte wire
    /// segments after the qdisc ([`Packet::gso_segment`]). 0 or 1 = an ordinary packet.
    pub gso_segs: u16,
    /// Payload bytes per segment of a GSO buffer (`gso_size`, the MSS).
    pub gso_size: u16,
    pub hdr: TransportHeader,
}

impl Packet {
    /// The conversation (connection or stream) the packet belongs to, as the engine numbers
    /// them: the low 32 bits of [`Packet::tag`]. Disciplines use it only to label per-flow
    /// observations (`flow{n}`) and to tell whether two packets share a conversation.
    #[inline]
    pub fn conversation(&self) -> u32 {
        self.tag as u32
    }

    /// `INET_ECN_set_ce`: marks ECT(0), ECT(1) or already-CE packets and returns true;
    /// returns false (caller must drop instead) for Not-ECT.
    #[inline]
    pub fn set_ce(&mut self) -> bool {
        if self.ecn.is_capable() {
            self.ecn = Ecn::Ce;
            true
        } else {
            false
        }
    }

    /// Wire packets this buffer becomes (1 unless it is a GSO buffer).
    #[inline]
    pub fn wire_packets(&self) -> u32 {
        (self.gso_segs as u32).max(1)
    }

    /// Software GSO (Linux `skb_gso_segment` → `tcp_gso_segment`, run by
    /// `validate_xmit_skb` when the device cannot segment): calls `out` with each wire
    /// segment in sequence order. Each segment carries `gso_size` payload bytes (the last
    /// one the rest) behind its own copy of the headers; FIN and PSH stay on the last
    /// segment, CWR on the first; `truesize` is shared out in proportion to the payload.
    pub fn gso_segment(&self, mut out: impl FnMut(Packet)) {
        for i in 0..self.wire_packets() {
            out(self.segment(i));
        }
    }

    /// Wire segment `i` (0-based) of this buffer, as [`Packet::gso_segment`] produces it;
    /// the buffer itself when it is not a GSO buffer. Segment 0 keeps the buffer's `uid`;
    /// segment `i > 0` gets the fresh identity `uid + (i << SEGMENT_UID_SHIFT)` (unique
    /// while engines number packets below 2^48; the buffer's uid is its low 48 bits). An
    /// engine that numbers packets itself may renumber the segments it creates.
    pub fn segment(&self, i: u32) -> Packet {
        let mut seg = *self;
        self.cut_segment(i, &mut seg);
        seg
    }

    /// [`Packet::segment`] in place: turns `seg`, which must hold a copy of this buffer,
    /// into wire segment `i` by writing only the fields that differ. An engine copies the
    /// buffer once, straight into the queue slot the segment will occupy, and cuts it
    /// there (one ~200-byte copy per segment instead of two; issue 19, session 7).
    #[inline]
    pub fn cut_segment(&self, i: u32, seg: &mut Packet) {
        if self.wire_packets() == 1 {
            return;
        }
        debug_assert!(i < self.wire_packets());
        let (offset, payload) = self.segment_payload(i);
        // Cumulative shares: the segments' truesizes add up to the buffer's exactly
        // (TSQ credit returned per segment must not leak).
        let truesize = self.truesize_share(offset + payload) - self.truesize_share(offset);
        let cut = SegmentCut {
            index: i,
            offset,
            payload,
            len_bytes: payload + self.segment_headers_bytes(),
            truesize_bytes: truesize,
        };
        self.apply_cut(&cut, seg);
    }

    /// The buffer's `truesize` shared out over its payload: the part of it charged to the
    /// payload bytes before `upto`.
    #[inline(always)]
    fn truesize_share(&self, upto: u32) -> u32 {
        let total = self.hdr.payload_bytes;
        (self.truesize_bytes as u64 * upto as u64 / total.max(1) as u64) as u32
    }

    /// The cuts of this buffer's wire segments, in order ([`SegmentCuts`]); one for a
    /// buffer that is not a GSO buffer (whose cut leaves it unchanged).
    #[inline]
    pub fn segment_cuts(&self) -> SegmentCuts {
        SegmentCuts {
            n: self.wire_packets(),
            next: 0,
            size: self.gso_size.max(1) as u32,
            total: self.hdr.payload_bytes,
            headers: if self.wire_packets() > 1 {
                self.segment_headers_bytes()
            } else {
                0
            },
            whole_len: self.len_bytes,
            truesize: self.truesize_bytes,
            share_done: 0,
        }
    }

    /// Turns `seg`, a copy of this buffer, into the wire segment `cut` describes (from
    /// [`Packet::segment_cuts`]; the same fields as [`Packet::cut_segment`] writes).
    /// Nothing changes for a buffer that is not a GSO buffer.
    #[inline(always)]
    pub fn apply_cut(&self, cut: &SegmentCut, seg: &mut Packet) {
        let n = self.wire_packets();
        if n == 1 {
            return;
        }
        let i = cut.index;
        let total = self.hdr.payload_bytes;
        seg.gso_segs = 1;
        seg.gso_size = 0;
        seg.uid = self.uid.wrapping_add((i as u64) << SEGMENT_UID_SHIFT);
        seg.hdr.seq = self.hdr.seq + cut.offset as u64;
        seg.hdr.payload_bytes = cut.payload;
        seg.len_bytes = cut.len_bytes;
        seg.truesize_bytes = cut.truesize_bytes;
        seg.remaining_bytes = self.remaining_bytes + (total - cut.offset - cut.payload) as u64;
        if i + 1 != n {
            seg.hdr.flags &= !(tcp_flags::FIN | tcp_flags::PSH);
        }
        if i > 0 {
            seg.hdr.flags &= !tcp_flags::CWR;
        }
    }

    /// What [`Packet::apply_cut`] reads of this buffer, to cut its segments in place later
    /// without a copy of the whole buffer ([`SegmentBase::cut_in_place`]).
    #[inline]
    pub fn segment_base(&self) -> SegmentBase {
        SegmentBase {
            uid: self.uid,
            seq: self.hdr.seq,
            remaining_bytes: self.remaining_bytes,
            enqueued_at: self.enqueued_at,
            total: self.hdr.payload_bytes,
            n: self.wire_packets(),
            flags: self.hdr.flags,
        }
    }

    /// Offset and length of segment `i`'s payload in the buffer's (of a GSO buffer: every
    /// segment but the last carries exactly `gso_size` bytes). Segment `i`'s `len_bytes` is
    /// this length plus [`Packet::segment_headers_bytes`].
    #[inline]
    pub fn segment_payload(&self, i: u32) -> (u32, u32) {
        let total = self.hdr.payload_bytes;
        let size = self.gso_size.max(1) as u32;
        let offset = (i * size).min(total);
        (offset, size.min(total - offset))
    }

    /// Header bytes of each wire segment of a GSO buffer: the buffer's non-payload bytes
    /// shared out equally (every segment carries its own copy of the headers).
    #[inline]
    pub fn segment_headers_bytes(&self) -> u32 {
        (self.len_bytes - self.hdr.payload_bytes) / self.wire_packets()
    }

    /// A bare packet for tests and benchmarks, in conversation `flow`.
    pub fn synthetic(uid: u64, flow: u32, len_bytes: u32) -> Packet {
        let key = FlowKey {
            src_addr: Addr::v4(flow),
            dst_addr: Addr::v4(1_000_000),
            src_port: 1000 + (flow % 60000) as u16,
            dst_port: 80,
            proto: proto::UDP,
        };
        Packet {
            uid,
            tag: flow as u64,
            key,
            hash: key.hash(0),
            len_bytes,
            truesize_bytes: truesize_for(len_bytes),
            ..Default::default()
        }
    }
}

/// A typical Linux `skb->truesize` for a frame of `len` bytes: the data rounded up to a
/// power-of-two slab plus ~576 bytes of `sk_buff` and `skb_shared_info` overhead. A 1514-B
/// frame costs 2880 B, a 66-B ACK 768 B, close to what `ss -m` shows on 6.x kernels.
pub fn truesize_for(len: u32) -> u32 {
    let data = (len + 64).next_power_of_two().max(256);
    data + 576 + if len > 1024 { 256 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gso_segment_conserves_bytes_and_sequence() {
        // 45 segments of 1448 B (+66 B of headers each, as Linux builds for a 64-KiB
        // skb) with the last one short: tcp_gso_segment keeps FIN/PSH on the last only.
        let mut p = Packet::synthetic(1, 1, 0);
        let payload = 44 * 1448 + 1000;
        p.hdr.seq = 5000;
        p.hdr.payload_bytes = payload;
        p.hdr.flags = tcp_flags::ACK | tcp_flags::PSH | tcp_flags::FIN | tcp_flags::CWR;
        p.len_bytes = payload + 45 * 66;
        p.truesize_bytes = payload + 832;
        p.gso_segs = 45;
        p.gso_size = 1448;
        let mut segs = Vec::new();
        p.gso_segment(|s| segs.push(s));
        assert_eq!(segs.len(), 45);
        assert_eq!(segs.iter().map(|s| s.len_bytes).sum::<u32>(), p.len_bytes);
        assert_eq!(
            segs.iter().map(|s| s.hdr.payload_bytes).sum::<u32>(),
            payload
        );
        assert!(segs.iter().all(|s| s.wire_packets() == 1));
        for w in segs.windows(2) {
            assert_eq!(w[0].hdr.seq + w[0].hdr.payload_bytes as u64, w[1].hdr.seq);
        }
        assert_eq!(segs[0].len_bytes, 1514);
        assert_eq!(segs[44].hdr.payload_bytes, 1000);
        assert_eq!(segs[0].hdr.flags, tcp_flags::ACK | tcp_flags::CWR);
        assert_eq!(segs[1].hdr.flags, tcp_flags::ACK);
        assert_eq!(
            segs[44].hdr.flags,
            tcp_flags::ACK | tcp_flags::PSH | tcp_flags::FIN
        );
        // TSQ credit comes back per segment when a qdisc splits the buffer: exact sum.
        let t: u32 = segs.iter().map(|s| s.truesize_bytes).sum();
        assert_eq!(t, p.truesize_bytes);
        // An ordinary packet is its own single segment.
        let mut n = 0;
        Packet::synthetic(2, 1, 1514).gso_segment(|_| n += 1);
        assert_eq!(n, 1);
    }

    /// The cuts `segment_cuts` yields one after another (what the engine's burst loop
    /// applies) are the segments worked out by hand: payloads 1448, 1448, 1000 behind
    /// 66 B of headers each; truesize 1000 shared by cumulative floors,
    /// floor(1000·1448/3896) = 371, floor(1000·2896/3896) = 743, 1000: 371, 372, 257.
    #[test]
    fn segment_cuts_in_order_are_the_segments() {
        let mut p = Packet::synthetic(1, 1, 0);
        p.hdr.seq = 5000;
        p.hdr.payload_bytes = 3896;
        p.hdr.flags = tcp_flags::ACK | tcp_flags::PSH | tcp_flags::CWR;
        p.len_bytes = 3896 + 3 * 66;
        p.truesize_bytes = 1000;
        p.remaining_bytes = 10_000;
        p.gso_segs = 3;
        p.gso_size = 1448;
        let mut cuts = p.segment_cuts();
        let mut got = vec![];
        while let Some(cut) = cuts.next_cut() {
            let mut seg = p;
            p.apply_cut(&cut, &mut seg);
            // The same as cutting segment `index` on its own.
            let mut alone = p;
            p.cut_segment(cut.index, &mut alone);
            assert_eq!(format!("{seg:?}"), format!("{alone:?}"));
            got.push((
                seg.hdr.seq,
                seg.hdr.payload_bytes,
                seg.len_bytes,
                seg.truesize_bytes,
                seg.remaining_bytes,
                seg.hdr.flags,
                seg.gso_segs,
            ));
        }
        let (ack, psh, cwr) = (tcp_flags::ACK, tcp_flags::PSH, tcp_flags::CWR);
        assert_eq!(
            got,
            vec![
                (5000, 1448, 1514, 371, 12_448, ack | cwr, 1),
                (6448, 1448, 1514, 372, 11_000, ack, 1),
                (7896, 1000, 1066, 257, 10_000, ack | psh, 1),
            ]
        );
        assert_eq!(cuts.remaining(), 0);
        // An ordinary packet: one cut, which leaves it as it is.
        let q = Packet::synthetic(2, 1, 1514);
        let mut cuts = q.segment_cuts();
        let cut = cuts.next_cut().expect("one segment");
        assert_eq!((cut.index, cut.len_bytes), (0, 1514));
        assert!(cuts.next_cut().is_none());
    }

    /// Cutting each segment in place over the one before (`SegmentBase::cut_in_place`,
    /// an engine's run of segments in one slot) gives exactly the segments `apply_cut`
    /// makes of fresh copies, even after a hop stamped the previous one's queueing time:
    /// the shares and flags of `segment_cuts_in_order_are_the_segments` by hand.
    #[test]
    fn segments_cut_in_place_over_each_other_are_the_segments() {
        let mut p = Packet::synthetic(1, 1, 0);
        p.hdr.seq = 5000;
        p.hdr.payload_bytes = 3896;
        p.hdr.flags = tcp_flags::ACK | tcp_flags::PSH | tcp_flags::CWR | tcp_flags::FIN;
        p.len_bytes = 3896 + 3 * 66;
        p.truesize_bytes = 1000;
        p.remaining_bytes = 10_000;
        p.enqueued_at = Time(77);
        p.gso_segs = 3;
        p.gso_size = 1448;
        let base = p.segment_base();
        let mut cuts = p.segment_cuts();
        let mut slot = p;
        let mut got = vec![];
        while let Some(cut) = cuts.next_cut() {
            if cut.index == 0 {
                p.apply_cut(&cut, &mut slot);
            } else {
                base.cut_in_place(&cut, &mut slot);
            }
            assert_eq!(format!("{slot:?}"), format!("{:?}", p.segment(cut.index)));
            got.push((slot.hdr.seq, slot.truesize_bytes, slot.hdr.flags));
            // The next hop's stamp, in place: the next cut must not keep it.
            slot.enqueued_at = Time(1_000 + cut.index as u64);
        }
        let (ack, psh, cwr, fin) = (
            tcp_flags::ACK,
            tcp_flags::PSH,
            tcp_flags::CWR,
            tcp_flags::FIN,
        );
        assert_eq!(
            got,
            vec![
                (5000, 371, ack | cwr),
                (6448, 372, ack),
                (7896, 257, ack | psh | fin),
            ]
        );
    }

    /// The remaining segments' lengths in (at most) three runs, by hand, and as the cuts
    /// give them for every position of the cursor over a range of buffers.
    #[test]
    fn remaining_lens_are_the_cuts_lengths() {
        let buffer = |total: u32, segs: u16, size: u16| {
            let mut p = Packet::synthetic(1, 1, 0);
            p.hdr.payload_bytes = total;
            p.len_bytes = total + segs.max(1) as u32 * 66;
            p.gso_segs = segs;
            p.gso_size = size;
            p
        };
        // 2 x 1448 + 1000 B: two 1514-B frames and a 1066-B one (66 B of headers each).
        let mut cuts = buffer(3896, 3, 1448).segment_cuts();
        assert_eq!(cuts.remaining_lens(), [(1514, 2), (1066, 1), (66, 0)]);
        cuts.next_cut();
        assert_eq!(cuts.remaining_lens(), [(1514, 1), (1066, 1), (66, 0)]);
        cuts.next_cut();
        cuts.next_cut();
        assert_eq!(cuts.remaining_lens(), [(1514, 0), (1066, 0), (66, 0)]);
        // Payload for two full segments of three: the third carries headers only.
        let cuts = buffer(2896, 3, 1448).segment_cuts();
        assert_eq!(cuts.remaining_lens(), [(1514, 2), (66, 1), (66, 0)]);
        // Not a GSO buffer: one packet of its own length.
        let cuts = Packet::synthetic(2, 1, 1514).segment_cuts();
        assert_eq!(cuts.remaining_lens(), [(1514, 1), (0, 0), (0, 0)]);
        for total in [0, 1, 999, 1448, 1449, 2896, 5000, 64_000] {
            for segs in [0u16, 1, 2, 3, 4, 7, 45] {
                for size in [1u16, 536, 1448] {
                    let mut cuts = buffer(total, segs, size).segment_cuts();
                    loop {
                        let mut want: Vec<u32> = vec![];
                        let mut rest = cuts;
                        while let Some(c) = rest.next_cut() {
                            want.push(c.len_bytes);
                        }
                        let got: Vec<u32> = cuts
                            .remaining_lens()
                            .iter()
                            .flat_map(|&(len, n)| std::iter::repeat_n(len, n as usize))
                            .collect();
                        assert_eq!(got, want, "total {total} segs {segs} size {size}");
                        if cuts.next_cut().is_none() {
                            break;
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn set_ce_follows_inet_ecn_set_ce() {
        let mut p = Packet::synthetic(1, 1, 100);
        assert!(!p.set_ce(), "Not-ECT cannot be marked");
        p.ecn = Ecn::Ect0;
        assert!(p.set_ce());
        assert_eq!(p.ecn, Ecn::Ce);
        assert!(p.set_ce(), "already CE counts as success");
        p.ecn = Ecn::Ect1;
        assert!(p.set_ce());
    }

    #[test]
    fn addresses_hold_ipv4_and_ipv6() {
        use std::net::IpAddr;
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        let a = Addr::from(v4);
        assert!(a.is_v4());
        assert_eq!(a.v4_bits(), Some(0xC000_0207));
        assert_eq!(a, Addr::v4(0xC000_0207));
        // RFC 4291 §2.5.5.2: the IPv4-mapped form ::ffff:192.0.2.7.
        assert_eq!(
            a.octets(),
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 7]
        );
        assert_eq!(IpAddr::from(a), v4);
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        let b = Addr::from(v6);
        assert!(!b.is_v4());
        assert_eq!(b.v4_bits(), None);
        assert_eq!(IpAddr::from(b), v6);
        assert_eq!(b.to_string(), "2001:db8::1");
        // Ordered like the bytes on the wire (memcmp), as the kernel orders flow endpoints.
        assert!(
            Addr::from("2001:db8::1".parse::<IpAddr>().unwrap())
                < Addr::from("2001:db8::2".parse::<IpAddr>().unwrap())
        );
    }

    fn v6_key(src: &str, dst: &str, sport: u16, dport: u16) -> FlowKey {
        FlowKey {
            src_addr: Addr::from(src.parse::<std::net::IpAddr>().unwrap()),
            dst_addr: Addr::from(dst.parse::<std::net::IpAddr>().unwrap()),
            src_port: sport,
            dst_port: dport,
            proto: proto::TCP,
        }
    }

    #[test]
    fn ipv6_hash_is_symmetric_and_uses_every_address_bit() {
        let k = v6_key("2001:db8::10", "2001:db8:1::20", 40000, 443);
        assert_eq!(
            k.hash(7),
            k.reversed().hash(7),
            "both directions hash alike"
        );
        // Same ports, addresses that differ only in their high bits (what an IPv4-sized
        // hash of the low 32 bits would confuse):
        let k2 = v6_key("2001:db9::10", "2001:db8:1::20", 40000, 443);
        assert_ne!(k.hash(7), k2.hash(7));
        // Equal addresses: ordered by port (the kernel swaps ports too).
        let k3 = v6_key("2001:db8::10", "2001:db8::10", 5000, 6000);
        assert_eq!(k3.hash(1), k3.reversed().hash(1));
        assert_ne!(k.src_host_hash(3), k2.src_host_hash(3));
    }

    #[test]
    fn hash_is_symmetric() {
        let k = FlowKey {
            src_addr: Addr::v4(3),
            dst_addr: Addr::v4(9),
            src_port: 40000,
            dst_port: 5201,
            proto: proto::TCP,
        };
        assert_eq!(k.hash(7), k.reversed().hash(7));
        assert_ne!(k.hash(7), k.hash(8), "salt changes the hash");
        let k2 = FlowKey {
            src_port: 40001,
            ..k
        };
        assert_ne!(k.hash(7), k2.hash(7));
    }

    #[test]
    fn ace_field_is_ae_cwr_ece_and_leaves_other_flags_alone() {
        // RFC 9768 Figure 2: AE is the most significant bit, ECE the least.
        let mut h = TransportHeader {
            flags: tcp_flags::ACK | tcp_flags::PSH,
            ..Default::default()
        };
        h.set_ace(0b101);
        assert!(h.ae);
        assert_eq!(
            h.flags,
            tcp_flags::ACK | tcp_flags::PSH | tcp_flags::ECE,
            "5 = AE and ECE"
        );
        h.set_ace(0b010);
        assert!(!h.ae);
        assert_eq!(h.flags, tcp_flags::ACK | tcp_flags::PSH | tcp_flags::CWR);
        for v in 0..8 {
            h.set_ace(v);
            assert_eq!(h.ace(), v);
        }
        h.set_ace(13); // only the low 3 bits: 13 mod 8 = 5
        assert_eq!(h.ace(), 5);
        // The option: absent by default; ECEB is the CE byte count mod 2^24.
        assert_eq!(h.accecn_eceb(), None);
        h.set_accecn_eceb(0);
        assert_eq!(h.accecn_eceb(), Some(0));
        h.set_accecn_eceb((1 << 24) + 1461);
        assert_eq!(h.accecn_eceb(), Some(1461));
        assert_eq!(
            core::mem::size_of::<TransportHeader>(),
            72,
            "fits the padding"
        );
    }

    #[test]
    fn packet_stays_small() {
        // Moved by value through every queue: keep it within 208 bytes (3.25 cache lines).
        assert!(
            core::mem::size_of::<Packet>() <= 208,
            "{}",
            core::mem::size_of::<Packet>()
        );
    }
}
