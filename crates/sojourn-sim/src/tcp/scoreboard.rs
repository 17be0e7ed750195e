//! The retransmission queue with its SACK scoreboard (RFC 6675, RFC 2018).
//!
//! The queue holds every transmitted segment from `snd_una` to `snd_nxt`, in sequence
//! order, as runs of segments in one state: a [`Seg`] entry covers the `pcount` segments
//! of one transmitted buffer (a GSO buffer of up to 45 segments is one entry, as Linux
//! keeps one skb per buffer, `tcp_skb_pcount`), all of one MSS but the last. An entry is
//! split at a segment boundary only where its segments' states part (a SACK block or a
//! cumulative ACK covering some of them, a retransmission of one, a loss mark inside it —
//! where Linux fragments the skb, `tcp_fragment`, `tcp_shifted_skb`). Every rule below
//! is still the per-segment rule: the counters count segments, and each operation gives
//! the result the same operation gives on one entry per segment (the tests check this
//! against such a queue). Each entry carries the Linux `tcp_skb_cb` state the sender
//! needs: SACKed, lost, retransmitted, and the delivery-rate snapshot taken when it was
//! (last) sent (`tcp_rate_skb_sent`). Counters mirror Linux's `packets_out`,
//! `sacked_out`, `lost_out`, `retrans_out`, so `pipe` (RFC 6675 §4, Linux
//! `tcp_packets_in_flight`) is O(1).
//!
//! Loss marking (RFC 6675 `IsLost`, DupThresh segments SACKed above a hole) advances a
//! monotone mark over the queue, so each segment is examined a bounded number of times.

use sojourn_core::packet::SackBlock;
use sojourn_core::Time;
use std::collections::VecDeque;

pub const SACKED: u8 = 1;
pub const LOST: u8 = 2;
/// A retransmission of this segment is in flight (Linux `TCPCB_SACKED_RETRANS`).
pub const RETRANS: u8 = 4;
/// Was ever retransmitted (Karn's algorithm: no RTT sample).
pub const EVER_RETRANS: u8 = 8;
pub const FIN: u8 = 16;

/// A run of `pcount` consecutive segments in one state (one transmitted buffer, or a
/// part of one).
#[derive(Clone, Copy, Debug)]
pub struct Seg {
    pub start: u64,
    /// Payload bytes of all its segments.
    pub len: u32,
    /// Segments: `pcount − 1` of one MSS, then the rest of `len` (Linux `tcp_skb_pcount`).
    pub pcount: u32,
    pub flags: u8,
    /// Last transmission time.
    pub sent_at: Time,
    /// Connection's `delivered` count when sent (packets).
    pub delivered: u64,
    /// Connection's `delivered_mstamp` when sent.
    pub delivered_at: Time,
    /// Connection's `first_tx_mstamp` when sent.
    pub first_tx_at: Time,
    pub app_limited: bool,
}

impl Seg {
    /// Sequence number after this segment (FIN takes one).
    #[inline]
    pub fn end(&self) -> u64 {
        self.start + self.len as u64 + (self.flags & FIN != 0) as u64
    }
    #[inline]
    pub fn is(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// Start of segment `k` of entry `e` (segments of `mss` bytes).
#[inline]
fn seg_start(mss: u32, e: &Seg, k: u32) -> u64 {
    e.start + k as u64 * mss as u64
}

/// End (the sequence number after) of segment `k` of `e`.
#[inline]
fn seg_end(mss: u32, e: &Seg, k: u32) -> u64 {
    if k + 1 >= e.pcount {
        e.end()
    } else {
        e.start + (k as u64 + 1) * mss as u64
    }
}

/// Segments of `e` that end at or below `seq` (a prefix of them).
#[inline]
fn segs_ending_by(mss: u32, e: &Seg, seq: u64) -> u32 {
    if e.end() <= seq {
        e.pcount
    } else if e.pcount == 1 || seq <= e.start {
        0
    } else {
        (((seq - e.start) / mss as u64) as u32).min(e.pcount - 1)
    }
}

/// Segments among the first `k` of `e` that start below `seq`.
#[inline]
fn segs_starting_below(mss: u32, e: &Seg, k: u32, seq: u64) -> u32 {
    if seq <= e.start {
        0
    } else if k == 1 {
        1
    } else {
        (((seq - e.start).div_ceil(mss as u64)) as u32).min(k)
    }
}

/// What a cumulative ACK newly delivered: the segments it removed that were not SACKed
/// before ([`Scoreboard::ack_cum`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct CumAcked {
    /// Segments.
    pub delivered: u64,
    /// One of them was ever retransmitted (Karn; Linux `FLAG_RETRANS_DATA_ACKED`).
    pub retrans_acked: bool,
    /// The most recently sent one (latest send time, then highest sequence), as a
    /// one-segment entry: the delivery-rate sample's segment.
    pub best: Option<Seg>,
    /// Latest send time among those never retransmitted.
    pub newest_sent_at: Option<Time>,
    /// Send time of the lowest one never retransmitted.
    pub oldest_sent_at: Option<Time>,
}

#[derive(Default)]
pub struct Scoreboard {
    /// The entries, in sequence order, contiguous.
    pub segs: VecDeque<Seg>,
    /// Segment size of multi-segment entries (the connection's MSS).
    pub mss: u32,
    /// Segments in `segs` (Linux `packets_out`).
    packets: u32,
    pub sacked_out: u32,
    pub lost_out: u32,
    pub retrans_out: u32,
    /// Everything below this sequence that is not SACKed is marked lost.
    lost_mark: u64,
    /// SACKed segments below `lost_mark`.
    sacked_below_mark: u32,
    /// Highest SACKed sequence end (0 if none).
    pub highest_sack: u64,
    /// The last SACK blocks processed, a ring (Linux keeps the previous ACK's blocks in
    /// `recv_sack_cache` for the same purpose): every segment wholly inside one of them is
    /// SACKed, for good — nothing clears the mark but the cumulative ACK that removes the
    /// segment — so a block seen again needs no work, and one grown at its end only the
    /// work of its new part ([`Scoreboard::sack`]). Boxed on first use: it is read only
    /// when SACK blocks arrive, and inline it made every socket 72 bytes larger, which cost
    /// cache misses per event with 10,000 active flows (bench/HISTORY.md, session 10).
    sack_cache: Option<Box<SackCache>>,
}

/// The ring of [`Scoreboard`]'s last processed SACK blocks.
#[derive(Default)]
struct SackCache {
    blocks: [SackBlock; SACK_CACHE],
    /// Next slot of `blocks` to overwrite.
    next: usize,
}

/// Blocks in [`Scoreboard`]'s SACK cache: an ACK carries at most 4 (RFC 2018 §3).
const SACK_CACHE: usize = 4;

impl Scoreboard {
    pub fn new(mss: u32) -> Scoreboard {
        Scoreboard {
            mss,
            ..Default::default()
        }
    }

    #[inline]
    pub fn packets_out(&self) -> u32 {
        self.packets
    }

    /// RFC 6675 "pipe" / Linux `tcp_packets_in_flight`:
    /// `packets_out - (sacked_out + lost_out) + retrans_out`.
    #[inline]
    pub fn in_flight(&self) -> u32 {
        self.packets - self.sacked_out - self.lost_out + self.retrans_out
    }

    /// Appends an entry (`pcount` ≥ 1 segments, all of one MSS but the last).
    pub fn push(&mut self, s: Seg) {
        debug_assert!(s.pcount >= 1);
        self.packets += s.pcount;
        self.segs.push_back(s);
    }

    /// The segment at `seq` or the first one starting after it: (entry index, segment
    /// index in the entry); the entry index is `segs.len()` if there is none.
    fn seg_at_or_after(&self, seq: u64) -> (usize, u32) {
        let i = self.segs.partition_point(|e| e.start < seq);
        if i > 0 {
            let e = &self.segs[i - 1];
            if e.pcount > 1 {
                let k = ((seq - e.start).div_ceil(self.mss as u64)) as u32;
                if k < e.pcount {
                    return (i - 1, k);
                }
            }
        }
        (i, 0)
    }

    /// Splits entry `i` after its first `k` segments (0 < k < pcount): the first `k`
    /// stay at `i`, the rest become entry `i + 1`, in the same state (Linux
    /// `tcp_fragment`). Counters do not change.
    fn split(&mut self, i: usize, k: u32) {
        let e = self.segs[i];
        debug_assert!(k > 0 && k < e.pcount);
        let head_len = k * self.mss;
        let mut tail = e;
        tail.start = e.start + head_len as u64;
        tail.len = e.len - head_len;
        tail.pcount = e.pcount - k;
        let head = &mut self.segs[i];
        head.len = head_len;
        head.pcount = k;
        head.flags &= !FIN;
        self.segs.insert(i + 1, tail);
    }

    /// Makes segment `k` of entry `i` an entry of its own; returns its index.
    pub fn isolate(&mut self, mut i: usize, k: u32) -> usize {
        if k > 0 {
            self.split(i, k);
            i += 1;
        }
        if self.segs[i].pcount > 1 {
            self.split(i, 1);
        }
        i
    }

    /// Removes segments fully below `ack` (the tests' form of [`Scoreboard::ack_cum`]).
    pub fn ack_to(&mut self, ack: u64) {
        self.ack_cum(ack);
    }

    /// The cumulative ACK of everything below `ack`: removes those segments (trimming an
    /// entry the ACK ends inside) and sums up, over the ones not SACKed before, what the
    /// sender's ACK processing needs (Linux `tcp_clean_rtx_queue`). O(entries), not
    /// O(segments): the segments of an entry share their state.
    #[inline]
    pub fn ack_cum(&mut self, ack: u64) -> CumAcked {
        let mss = self.mss;
        let mut out = CumAcked::default();
        let mut best_sent = Time::ZERO;
        let mut whole = 0;
        let mut trim = 0;
        // Usually the ACK ends inside the first entry (a GSO buffer acknowledged two
        // segments at a time): index the entries, no iterator or drain set up for that.
        while let Some(e) = self.segs.get(whole) {
            let k = segs_ending_by(mss, e, ack);
            if k == 0 {
                break;
            }
            if e.flags & (SACKED | LOST | RETRANS) != 0 {
                if e.is(SACKED) {
                    self.sacked_out -= k;
                    self.sacked_below_mark -= segs_starting_below(mss, e, k, self.lost_mark);
                }
                if e.is(LOST) {
                    self.lost_out -= k;
                }
                if e.is(RETRANS) {
                    self.retrans_out -= k;
                }
            }
            self.packets -= k;
            if !e.is(SACKED) {
                out.delivered += k as u64;
                if e.is(EVER_RETRANS) {
                    out.retrans_acked = true;
                } else {
                    // Never retransmitted: an RTT sample candidate.
                    out.oldest_sent_at.get_or_insert(e.sent_at);
                    out.newest_sent_at =
                        Some(e.sent_at.max(out.newest_sent_at.unwrap_or(e.sent_at)));
                }
                // In sequence order a later segment has the larger end, so it is the
                // more recently sent one unless it was sent earlier; of one entry's
                // segments (one send time) the last one acknowledged.
                if out.best.is_none() || e.sent_at >= best_sent {
                    best_sent = e.sent_at;
                    let start = seg_start(mss, e, k - 1);
                    let end = seg_end(mss, e, k - 1);
                    let fin = k == e.pcount && e.is(FIN);
                    out.best = Some(Seg {
                        start,
                        len: (end - start - fin as u64) as u32,
                        pcount: 1,
                        flags: if fin { e.flags } else { e.flags & !FIN },
                        ..*e
                    });
                }
            }
            if k < e.pcount {
                trim = k;
                break;
            }
            whole += 1;
        }
        // Whole entries acknowledged: usually none or one (a drain costs more to set up).
        for _ in 0..whole {
            self.segs.pop_front();
        }
        if trim > 0 {
            let cut = trim * mss;
            let e = self.segs.front_mut().unwrap();
            e.start += cut as u64;
            e.len -= cut;
            e.pcount -= trim;
        }
        if self.lost_mark < ack {
            self.raise_mark_into_front(ack);
        }
        out
    }

    /// Moves the loss mark up to a cumulative ACK `ack`. An ACK that ends inside a
    /// segment (one a resegmented retransmission would produce) leaves that segment at the
    /// front with its start below the new mark, so a SACKed one now counts among
    /// `sacked_below_mark` — the set `ack_cum` and `mark_lost` take it to be (SACKed
    /// segments whose start is below the mark). Without this the count missed it, and the
    /// next ACK subtracted a segment never added (a debug-build overflow).
    fn raise_mark_into_front(&mut self, ack: u64) {
        if let Some(e) = self.segs.front() {
            if e.is(SACKED) && e.start < ack && e.start >= self.lost_mark {
                self.sacked_below_mark += 1;
            }
        }
        self.lost_mark = ack;
    }

    /// [`Scoreboard::ack_cum`] for a queue in which no segment is SACKed, marked lost or
    /// being retransmitted (`sacked_out`, `lost_out` and `retrans_out` all 0, as on the
    /// sender's quiet-ACK path): only `packets` moves, and every acknowledged segment is
    /// newly delivered. The same result as `ack_cum` without its per-entry state tests and
    /// bookkeeping: an ACK covering several small buffers (one or two segments each, a slow
    /// link's) costs about half as much (issue 19).
    #[inline]
    pub fn ack_cum_clean(&mut self, ack: u64) -> CumAcked {
        debug_assert_eq!(self.sacked_out | self.lost_out | self.retrans_out, 0);
        let mss = self.mss;
        let mut out = CumAcked::default();
        let mut best_sent = Time::ZERO;
        while let Some(e) = self.segs.front_mut() {
            let k = segs_ending_by(mss, e, ack);
            if k == 0 {
                break;
            }
            self.packets -= k;
            out.delivered += k as u64;
            if e.is(EVER_RETRANS) {
                out.retrans_acked = true;
            } else {
                out.oldest_sent_at.get_or_insert(e.sent_at);
                out.newest_sent_at = Some(e.sent_at.max(out.newest_sent_at.unwrap_or(e.sent_at)));
            }
            // As in `ack_cum`: the last acknowledged segment of the latest-sent entry.
            if out.best.is_none() || e.sent_at >= best_sent {
                best_sent = e.sent_at;
                let start = seg_start(mss, e, k - 1);
                let end = seg_end(mss, e, k - 1);
                let fin = k == e.pcount && e.is(FIN);
                out.best = Some(Seg {
                    start,
                    len: (end - start - fin as u64) as u32,
                    pcount: 1,
                    flags: if fin { e.flags } else { e.flags & !FIN },
                    ..*e
                });
            }
            if k < e.pcount {
                let cut = k * mss;
                e.start += cut as u64;
                e.len -= cut;
                e.pcount -= k;
                break;
            }
            self.segs.pop_front();
        }
        if self.lost_mark < ack {
            self.lost_mark = ack;
        }
        out
    }

    /// [`Scoreboard::ack_cum`] for the usual ACK of a quiet connection: it ends inside
    /// the first entry or at its end, and that entry is neither SACKed, marked lost nor
    /// being retransmitted. Then only that entry's first `k` segments go (the entry is
    /// trimmed, or removed when `k` is all of them) and every one of them is newly
    /// delivered with the entry's send time and delivery-rate snapshot. Returns the entry
    /// as it was and `k`; `None`, changing nothing, for any other ACK.
    #[inline(always)]
    pub fn ack_front(&mut self, ack: u64) -> Option<(Seg, u32)> {
        let mss = self.mss;
        let e = self.segs.front_mut()?;
        if e.flags & (SACKED | LOST | RETRANS) != 0 || ack > e.end() {
            return None;
        }
        let k = segs_ending_by(mss, e, ack);
        if k == 0 {
            return None;
        }
        let before = *e;
        if k < before.pcount {
            let cut = k * mss;
            e.start += cut as u64;
            e.len -= cut;
            e.pcount -= k;
        } else {
            self.segs.pop_front();
        }
        self.packets -= k;
        if self.lost_mark < ack {
            self.lost_mark = ack;
        }
        Some((before, k))
    }

    /// Marks segments fully inside `b` SACKed; calls `f` once for each entry of newly
    /// SACKed segments (its `pcount` of them).
    ///
    /// A block the cache holds changes nothing; a cached block grown at its end (each
    /// duplicate ACK after a loss reports the block of the segments above the hole one
    /// segment longer) is processed from its old end when that is an entry boundary:
    /// the walk from its start would pass the SACKed entries before it unchanged. Without
    /// the cache, that walk grew with every duplicate ACK (issue 19). The same result as
    /// [`Scoreboard::sack_uncached`], entries included.
    pub fn sack(&mut self, b: SackBlock, f: impl FnMut(&Seg)) {
        let hit = self.sack_cache.as_deref().and_then(|cache| {
            cache
                .blocks
                .iter()
                .find(|c| c.start == b.start && c.end <= b.end && c.end > c.start)
                .copied()
        });
        if let Some(c) = hit {
            if c.end == b.end {
                return;
            }
            let (i, k) = self.seg_at_or_after(c.end);
            let boundary = match self.segs.get(i) {
                Some(e) => k == 0 && e.start == c.end,
                None => self.segs.back().is_none_or(|e| e.end() <= c.end),
            };
            if boundary {
                self.sack_entries_from(i, b, f);
                self.remember_sack(b);
                return;
            }
        }
        self.sack_uncached(b, f);
        self.remember_sack(b);
    }

    /// Caches processed block `b`, cut at the end of the queue: segments sent later may
    /// lie inside a block that reaches beyond what was sent (a receiver never sends one,
    /// but the cache must not rely on it), and they are not SACKed.
    #[inline]
    fn remember_sack(&mut self, b: SackBlock) {
        let Some(last) = self.segs.back() else {
            return;
        };
        let cache = self.sack_cache.get_or_insert_with(Box::default);
        cache.blocks[cache.next] = SackBlock {
            start: b.start,
            end: b.end.min(last.end()),
        };
        cache.next = (cache.next + 1) % SACK_CACHE;
    }

    /// [`Scoreboard::sack`] without the cache: the walk from the block's start.
    pub fn sack_uncached(&mut self, b: SackBlock, f: impl FnMut(&Seg)) {
        let (mut i, k) = self.seg_at_or_after(b.start);
        if i < self.segs.len() && k > 0 {
            // The block starts inside entry i: its segments from k on are candidates.
            let e = self.segs[i];
            if seg_end(self.mss, &e, k) > b.end {
                return;
            }
            if e.is(SACKED) {
                if e.end() > b.end {
                    return;
                }
            } else {
                self.split(i, k);
            }
            i += 1;
        }
        self.sack_entries_from(i, b, f);
    }

    /// The walk of [`Scoreboard::sack_uncached`] from entry `i`, which starts inside `b`.
    fn sack_entries_from(&mut self, mut i: usize, b: SackBlock, mut f: impl FnMut(&Seg)) {
        while i < self.segs.len() {
            let e = self.segs[i];
            let k = segs_ending_by(self.mss, &e, b.end);
            if k == 0 {
                break;
            }
            if !e.is(SACKED) {
                if k < e.pcount {
                    self.split(i, k);
                }
                let lost_mark = self.lost_mark;
                let below = segs_starting_below(self.mss, &self.segs[i], k, lost_mark);
                let s = &mut self.segs[i];
                s.flags |= SACKED;
                self.sacked_out += k;
                if s.is(LOST) {
                    s.flags &= !LOST;
                    self.lost_out -= k;
                }
                if s.is(RETRANS) {
                    s.flags &= !RETRANS;
                    self.retrans_out -= k;
                }
                self.sacked_below_mark += below;
                self.highest_sack = self.highest_sack.max(s.end());
                f(s);
            }
            if k < e.pcount {
                break;
            }
            i += 1;
        }
    }

    /// RFC 6675 §4 `IsLost`: a segment is lost when at least `dupthresh` segments above
    /// it are SACKed. Marks newly lost segments; returns how many and the sequence number
    /// of the lowest one.
    #[inline]
    pub fn mark_lost(&mut self, dupthresh: u32) -> (u32, u64) {
        // Fewer than `dupthresh` SACKed segments above the mark: no segment can qualify
        // (`above` below is at most this), so skip the search. This is the common ACK
        // (nothing SACKed) and was ~5 % of a 10 Gb/s run's instructions (issue 19);
        // inlined, the check costs the caller no call.
        if self.sacked_out - self.sacked_below_mark < dupthresh {
            return (0, u64::MAX);
        }
        self.mark_lost_from_mark(dupthresh)
    }

    /// The search of [`Scoreboard::mark_lost`] from the loss mark on.
    fn mark_lost_from_mark(&mut self, dupthresh: u32) -> (u32, u64) {
        let mut newly = 0;
        let mut first = u64::MAX;
        let (mut i, mut k) = self.seg_at_or_after(self.lost_mark);
        while i < self.segs.len() {
            let e = self.segs[i];
            // SACKed segments above the mark, this entry's included.
            let above = self.sacked_out - self.sacked_below_mark;
            if e.is(SACKED) {
                // Each SACKed segment passed leaves one fewer above the next: segment t
                // (from k) qualifies while above − t − 1 ≥ dupthresh.
                let n = above.saturating_sub(dupthresh).min(e.pcount - k);
                if n == 0 {
                    break;
                }
                self.sacked_below_mark += n;
                self.lost_mark = seg_end(self.mss, &e, k + n - 1);
                if k + n < e.pcount {
                    break;
                }
            } else {
                if above < dupthresh {
                    break;
                }
                if k > 0 {
                    // The mark is inside this entry: only its segments from k on.
                    self.split(i, k);
                    i += 1;
                }
                let s = &mut self.segs[i];
                if !s.is(LOST) && !s.is(RETRANS) {
                    s.flags |= LOST;
                    self.lost_out += s.pcount;
                    newly += s.pcount;
                    first = first.min(s.start);
                }
                self.lost_mark = s.end();
            }
            i += 1;
            k = 0;
        }
        (newly, first)
    }

    /// Lost retransmissions (the time-ordering rule of RACK, RFC 8985 §6.2, applied to
    /// retransmitted segments only): a retransmission still in flight is lost when a
    /// segment sent more than `reo_wnd` after it has been delivered. Returns how many were
    /// marked and the lowest sequence number marked.
    pub fn mark_lost_retransmissions(&mut self, rack_xmit: Time, reo_wnd: u64) -> (u32, u64) {
        let mut left = self.retrans_out;
        let mut newly = 0;
        let mut first = u64::MAX;
        for s in self.segs.iter_mut() {
            if left == 0 {
                break;
            }
            if !s.is(RETRANS) {
                continue;
            }
            left -= s.pcount;
            if s.sent_at.0.saturating_add(reo_wnd) < rack_xmit.0 {
                if !s.is(LOST) {
                    self.lost_out += s.pcount;
                }
                s.flags &= !RETRANS;
                s.flags |= LOST;
                self.retrans_out -= s.pcount;
                newly += s.pcount;
                first = first.min(s.start);
            }
        }
        (newly, first)
    }

    /// Marks the first segment of entry `i` lost (NewReno head, RTO), if not SACKed.
    pub fn mark_one_lost(&mut self, i: usize) -> bool {
        let s = &self.segs[i];
        if s.is(SACKED) || s.is(LOST) {
            return false;
        }
        let i = self.isolate(i, 0);
        let s = &mut self.segs[i];
        if s.is(RETRANS) {
            s.flags &= !RETRANS;
            self.retrans_out -= 1;
        }
        s.flags |= LOST;
        self.lost_out += 1;
        true
    }

    /// RTO (RFC 6675 §5.1 / Linux `tcp_enter_loss`): every un-SACKed segment is lost and
    /// no retransmission is in flight any more.
    pub fn mark_all_lost(&mut self) {
        for s in self.segs.iter_mut() {
            if s.is(RETRANS) {
                s.flags &= !RETRANS;
            }
            if !s.is(SACKED) && !s.is(LOST) {
                s.flags |= LOST;
                self.lost_out += s.pcount;
            }
        }
        self.retrans_out = 0;
    }

    /// First entry at or after index `from` holding lost segments not yet retransmitted.
    pub fn next_to_retransmit(&self, from: usize) -> Option<usize> {
        (from..self.segs.len()).find(|&i| {
            let s = &self.segs[i];
            s.is(LOST) && !s.is(RETRANS)
        })
    }

    /// The first lost segment not yet retransmitted that starts at or after `seq`, made
    /// an entry of its own (ready to be retransmitted); its index.
    pub fn next_lost_from(&mut self, seq: u64) -> Option<usize> {
        let (i, k) = self.seg_at_or_after(seq);
        let j = self.next_to_retransmit(i)?;
        // Only the entry the search starts in can hold segments below `seq`.
        Some(self.isolate(j, if j == i { k } else { 0 }))
    }

    /// Checks the counters against a full recount and the entries' shape (tests).
    pub fn check(&self) -> Result<(), String> {
        let c = |f: u8| {
            self.segs
                .iter()
                .filter(|s| s.is(f))
                .map(|s| s.pcount)
                .sum::<u32>()
        };
        let packets: u32 = self.segs.iter().map(|s| s.pcount).sum();
        if c(SACKED) != self.sacked_out
            || c(LOST) != self.lost_out
            || c(RETRANS) != self.retrans_out
            || packets != self.packets
        {
            return Err(format!(
                "counters sacked {} lost {} retrans {} packets {} vs recount {} {} {} {}",
                self.sacked_out,
                self.lost_out,
                self.retrans_out,
                self.packets,
                c(SACKED),
                c(LOST),
                c(RETRANS),
                packets
            ));
        }
        for s in self.segs.iter() {
            if s.pcount == 0
                || (s.pcount > 1
                    && (s.len <= (s.pcount - 1) * self.mss || s.len > s.pcount * self.mss))
            {
                return Err(format!("entry shape {s:?} (mss {})", self.mss));
            }
        }
        for w in self.segs.iter().collect::<Vec<_>>().windows(2) {
            if w[0].end() != w[1].start {
                return Err("segments not contiguous".into());
            }
        }
        Ok(())
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn board(n: u64) -> Scoreboard {
        let mut b = Scoreboard::default();
        for i in 0..n {
            b.push(Seg {
                start: 1 + i * 100,
                len: 100,
                pcount: 1,
                flags: 0,
                sent_at: Time::ZERO,
                delivered: 0,
                delivered_at: Time::ZERO,
                first_tx_at: Time::ZERO,
                app_limited: false,
            });
        }
        b
    }

    /// A retransmission marked lost again (Linux `tcp_mark_skb_lost`): it leaves
    /// retrans_out and keeps only LOST; a SACKed or already lost segment is not marked.
    #[test]
    fn marking_a_retransmission_lost_takes_it_out_of_retrans_out() {
        let mut b = board(3);
        b.segs[1].flags |= RETRANS | EVER_RETRANS;
        b.retrans_out = 1;
        // RFC 6675 pipe: 3 out − 0 SACKed − 0 lost + 1 retransmitted.
        assert_eq!(b.in_flight(), 4);
        assert!(b.mark_one_lost(1));
        assert_eq!(b.segs[1].flags, LOST | EVER_RETRANS);
        assert_eq!((b.lost_out, b.retrans_out, b.in_flight()), (1, 0, 2));
        assert!(!b.mark_one_lost(1), "already lost");
        b.sack(
            SackBlock {
                start: 201,
                end: 301,
            },
            |_| {},
        );
        assert!(!b.mark_one_lost(2), "SACKed");
        assert_eq!(b.lost_out, 1);
        b.check().unwrap();
    }

    #[test]
    fn is_lost_needs_dupthresh_sacked_above() {
        // Segments 0..10; segment 2 missing, 3,4 SACKed: not yet lost (2 above < 3).
        let mut b = board(10);
        b.sack(
            SackBlock {
                start: 301,
                end: 501,
            },
            |_| {},
        );
        assert_eq!(b.mark_lost(3).0, 0);
        // A third SACKed segment above: 0, 1 and 2 are all lost (RFC 6675 IsLost holds
        // for every un-SACKed segment with three SACKed ones above it).
        b.sack(
            SackBlock {
                start: 501,
                end: 601,
            },
            |_| {},
        );
        assert_eq!(b.mark_lost(3), (3, 1));
        assert_eq!(b.in_flight(), 10 - 3 - 3);
        b.check().unwrap();
        // Cumulative ACK of the first two: counters follow.
        b.ack_to(201);
        assert_eq!(b.lost_out, 1);
        b.check().unwrap();
        // The retransmission of the hole is SACK-ed... no: it is cum-acked with the rest.
        b.ack_to(601);
        assert_eq!((b.sacked_out, b.lost_out, b.packets_out()), (0, 0, 4));
        b.check().unwrap();
    }

    #[test]
    fn random_sack_sequences_keep_counters_consistent() {
        use sojourn_core::rng::Rng;
        for seed in 0..50 {
            let mut r = Rng::from_seed(seed);
            let mut b = board(60);
            let mut una = 1u64;
            for _ in 0..40 {
                let s = 1 + r.below(60) * 100;
                let e = s + 100 * (1 + r.below(4));
                b.sack(SackBlock { start: s, end: e }, |_| {});
                b.mark_lost(3);
                if let Some(i) = b.next_to_retransmit(0) {
                    b.segs[i].flags |= RETRANS | EVER_RETRANS;
                    b.segs[i].sent_at = Time(r.below(100));
                    b.retrans_out += 1;
                }
                if r.chance(0.3) {
                    b.mark_lost_retransmissions(Time(r.below(200)), 10);
                }
                if r.chance(0.2) {
                    una += 100 * r.below(3);
                    b.ack_to(una);
                }
                b.check().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                assert!(b.in_flight() <= b.packets_out());
            }
        }
    }

    /// The per-segment queue this one replaced (one entry per segment), kept as the
    /// reference: every operation on runs of segments must give its results.
    mod per_segment {
        use super::super::{Seg, EVER_RETRANS, LOST, RETRANS, SACKED};
        use sojourn_core::packet::SackBlock;
        use sojourn_core::Time;
        use std::collections::VecDeque;

        #[derive(Default)]
        pub struct Board {
            pub segs: VecDeque<Seg>,
            pub sacked_out: u32,
            pub lost_out: u32,
            pub retrans_out: u32,
            pub lost_mark: u64,
            pub sacked_below_mark: u32,
            pub highest_sack: u64,
        }

        impl Board {
            pub fn ack_to(&mut self, ack: u64, mut f: impl FnMut(&Seg)) {
                while let Some(s) = self.segs.front() {
                    if s.end() > ack {
                        break;
                    }
                    let s = self.segs.pop_front().unwrap();
                    if s.is(SACKED) {
                        self.sacked_out -= 1;
                        if s.start < self.lost_mark {
                            self.sacked_below_mark -= 1;
                        }
                    }
                    if s.is(LOST) {
                        self.lost_out -= 1;
                    }
                    if s.is(RETRANS) {
                        self.retrans_out -= 1;
                    }
                    f(&s);
                }
                if self.lost_mark < ack {
                    // The front segment may now start below the mark (an ACK inside it).
                    if let Some(s) = self.segs.front() {
                        if s.is(SACKED) && s.start < ack && s.start >= self.lost_mark {
                            self.sacked_below_mark += 1;
                        }
                    }
                    self.lost_mark = ack;
                }
            }

            pub fn sack(&mut self, b: SackBlock, mut f: impl FnMut(&Seg)) {
                let mut i = self.segs.partition_point(|s| s.start < b.start);
                while i < self.segs.len() {
                    let s = &mut self.segs[i];
                    if s.end() > b.end {
                        break;
                    }
                    if !s.is(SACKED) {
                        s.flags |= SACKED;
                        self.sacked_out += 1;
                        if s.is(LOST) {
                            s.flags &= !LOST;
                            self.lost_out -= 1;
                        }
                        if s.is(RETRANS) {
                            s.flags &= !RETRANS;
                            self.retrans_out -= 1;
                        }
                        if s.start < self.lost_mark {
                            self.sacked_below_mark += 1;
                        }
                        self.highest_sack = self.highest_sack.max(s.end());
                        f(s);
                    }
                    i += 1;
                }
            }

            pub fn mark_lost(&mut self, dupthresh: u32) -> (u32, u64) {
                let mut newly = 0;
                let mut first = u64::MAX;
                let mut i = self.segs.partition_point(|s| s.start < self.lost_mark);
                while i < self.segs.len() {
                    let s = &mut self.segs[i];
                    let sacked = s.is(SACKED) as u32;
                    let above = self.sacked_out - self.sacked_below_mark - sacked;
                    if above < dupthresh {
                        break;
                    }
                    if sacked == 1 {
                        self.sacked_below_mark += 1;
                    } else if !s.is(LOST) && !s.is(RETRANS) {
                        s.flags |= LOST;
                        self.lost_out += 1;
                        newly += 1;
                        first = first.min(s.start);
                    }
                    self.lost_mark = s.end();
                    i += 1;
                }
                (newly, first)
            }

            pub fn mark_lost_retransmissions(
                &mut self,
                rack_xmit: Time,
                reo_wnd: u64,
            ) -> (u32, u64) {
                let mut left = self.retrans_out;
                let mut newly = 0;
                let mut first = u64::MAX;
                for s in self.segs.iter_mut() {
                    if left == 0 {
                        break;
                    }
                    if !s.is(RETRANS) {
                        continue;
                    }
                    left -= 1;
                    if s.sent_at.0.saturating_add(reo_wnd) < rack_xmit.0 {
                        if !s.is(LOST) {
                            self.lost_out += 1;
                        }
                        s.flags &= !RETRANS;
                        s.flags |= LOST;
                        self.retrans_out -= 1;
                        newly += 1;
                        first = first.min(s.start);
                    }
                }
                (newly, first)
            }

            pub fn mark_one_lost(&mut self, i: usize) -> bool {
                let s = &mut self.segs[i];
                if s.is(SACKED) || s.is(LOST) {
                    return false;
                }
                if s.is(RETRANS) {
                    s.flags &= !RETRANS;
                    self.retrans_out -= 1;
                }
                s.flags |= LOST;
                self.lost_out += 1;
                true
            }

            pub fn mark_all_lost(&mut self) {
                for s in self.segs.iter_mut() {
                    if s.is(RETRANS) {
                        s.flags &= !RETRANS;
                    }
                    if !s.is(SACKED) && !s.is(LOST) {
                        s.flags |= LOST;
                        self.lost_out += 1;
                    }
                }
                self.retrans_out = 0;
            }

            /// The sender's retransmission search: first lost, not retransmitted
            /// segment starting at or after `seq`.
            pub fn next_lost_from(&self, seq: u64) -> Option<usize> {
                let from = self.segs.partition_point(|s| s.start < seq);
                (from..self.segs.len()).find(|&i| {
                    let s = &self.segs[i];
                    s.is(LOST) && !s.is(RETRANS)
                })
            }

            pub fn retransmit(&mut self, i: usize, now: Time) {
                let s = &mut self.segs[i];
                if !s.is(RETRANS) {
                    s.flags |= RETRANS;
                    self.retrans_out += 1;
                }
                s.flags |= EVER_RETRANS;
                s.sent_at = now;
            }
        }
    }

    /// Every segment of the entry queue, one per line, as the per-segment queue holds it.
    /// One random buffer of the twin tests, pushed onto both boards: 1..=`max_segs`
    /// segments of `MSS` from `*nxt` (the last one short with probability `p_short`), FIN,
    /// ever-retransmitted and app-limited with their probabilities (a probability of 0 draws
    /// nothing, so each test keeps its own random stream). Returns whether it carried a FIN.
    struct TwinSend {
        max_segs: u64,
        p_short: f64,
        p_fin: f64,
        p_retrans: f64,
        p_app_limited: f64,
    }

    impl TwinSend {
        fn send(
            &self,
            r: &mut sojourn_core::rng::Rng,
            boards: [&mut Scoreboard; 2],
            nxt: &mut u64,
            now: u64,
        ) -> bool {
            const MSS: u32 = 100;
            let n = 1 + r.below(self.max_segs) as u32;
            let last = if r.chance(self.p_short) {
                1 + r.below(MSS as u64) as u32
            } else {
                MSS
            };
            let fin = if r.chance(self.p_fin) { FIN } else { 0 };
            let mut draw = |p: f64| p > 0.0 && r.chance(p);
            let retrans = if draw(self.p_retrans) {
                EVER_RETRANS
            } else {
                0
            };
            let e = Seg {
                start: *nxt,
                len: (n - 1) * MSS + last,
                pcount: n,
                flags: fin | retrans,
                sent_at: Time(now),
                delivered: now * 7,
                delivered_at: Time(now / 2),
                first_tx_at: Time(now / 3),
                app_limited: draw(self.p_app_limited),
            };
            for b in boards {
                b.push(e);
            }
            *nxt = e.end();
            e.is(FIN)
        }
    }

    fn expand(b: &Scoreboard) -> Vec<(u64, u32, u8, Time)> {
        let mut v = Vec::new();
        for e in b.segs.iter() {
            for k in 0..e.pcount {
                let start = seg_start(b.mss, e, k);
                let end = seg_end(b.mss, e, k);
                let fin = k + 1 == e.pcount && e.is(FIN);
                let flags = if fin { e.flags } else { e.flags & !FIN };
                v.push((start, (end - start - fin as u64) as u32, flags, e.sent_at));
            }
        }
        v
    }

    fn expand_ref(b: &per_segment::Board) -> Vec<(u64, u32, u8, Time)> {
        b.segs
            .iter()
            .map(|s| (s.start, s.len, s.flags, s.sent_at))
            .collect()
    }

    /// What the sender reads of a set of newly delivered segments (in visiting order):
    /// count, the (send time, end) maximum first reached, newest and oldest send time of
    /// the never retransmitted ones, and whether one was retransmitted.
    #[derive(Debug, Default, PartialEq)]
    struct Visit {
        delivered: u64,
        best: Option<(Time, u64, u64)>,
        newest: Option<Time>,
        oldest: Option<Time>,
        retrans: bool,
    }

    impl Visit {
        fn add(&mut self, s: &Seg, segs: u32) {
            self.delivered += segs as u64;
            if self
                .best
                .is_none_or(|(t, e, _)| (s.sent_at, s.end()) > (t, e))
            {
                self.best = Some((s.sent_at, s.end(), s.delivered));
            }
            if s.is(EVER_RETRANS) {
                self.retrans = true;
            } else {
                self.newest = Some(self.newest.map_or(s.sent_at, |t| t.max(s.sent_at)));
                self.oldest.get_or_insert(s.sent_at);
            }
        }
    }

    /// Runs of segments give exactly what one entry per segment gives, for random
    /// buffers (1–6 segments, a short last one at times, a FIN at the end), SACK blocks
    /// and cumulative ACKs on and off segment boundaries, loss marking, retransmissions,
    /// lost retransmissions, the NewReno head mark and RTOs.
    #[test]
    fn runs_of_segments_behave_as_one_entry_per_segment() {
        use sojourn_core::rng::Rng;
        const MSS: u32 = 100;
        for seed in 0..300 {
            let mut r = Rng::from_seed(seed);
            let mut b = Scoreboard::new(MSS);
            let mut rf = per_segment::Board::default();
            let mut nxt = 1u64;
            let mut una = 1u64;
            let mut now = 0u64;
            let mut hint = 1u64;
            let mut fin = false;
            for step in 0..120 {
                now += 1 + r.below(5);
                let t = Time(now);
                let what = r.below(100);
                let ctx = format!("seed {seed} step {step} op {what}");
                if what < 25 && !fin {
                    // A buffer of 1–6 segments, the last one short at times, maybe the FIN.
                    let n = 1 + r.below(6) as u32;
                    let last = if r.chance(0.3) {
                        1 + r.below(MSS as u64) as u32
                    } else {
                        MSS
                    };
                    let with_fin = r.chance(0.05);
                    let len = (n - 1) * MSS + last;
                    let e = Seg {
                        start: nxt,
                        len,
                        pcount: n,
                        flags: if with_fin { FIN } else { 0 },
                        sent_at: t,
                        delivered: now * 7,
                        delivered_at: Time(now / 2),
                        first_tx_at: Time(now / 3),
                        app_limited: r.chance(0.5),
                    };
                    for k in 0..n {
                        let s = nxt + (k * MSS) as u64;
                        let l = if k + 1 == n { last } else { MSS };
                        rf.segs.push_back(Seg {
                            start: s,
                            len: l,
                            pcount: 1,
                            flags: if with_fin && k + 1 == n { FIN } else { 0 },
                            ..e
                        });
                    }
                    b.push(e);
                    nxt = e.end();
                    fin |= with_fin;
                } else if what < 55 {
                    // A SACK block: on segment boundaries mostly, anywhere at times.
                    let span = nxt - una;
                    if span == 0 {
                        continue;
                    }
                    let segs = expand_ref(&rf);
                    let pick = |r: &mut Rng| {
                        if r.chance(0.8) {
                            let s = &segs[r.below(segs.len() as u64) as usize];
                            if r.chance(0.5) {
                                s.0
                            } else {
                                s.0 + s.1 as u64 + (s.2 & FIN != 0) as u64
                            }
                        } else {
                            una + r.below(span + 1)
                        }
                    };
                    let (x, y) = (pick(&mut r), pick(&mut r));
                    let blk = SackBlock {
                        start: x.min(y),
                        end: x.max(y),
                    };
                    let (mut v, mut vr) = (Visit::default(), Visit::default());
                    b.sack(blk, |s| v.add(s, s.pcount));
                    rf.sack(blk, |s| vr.add(s, 1));
                    assert_eq!(v.delivered, vr.delivered, "{ctx}");
                    assert_eq!(v.newest, vr.newest, "{ctx}");
                    assert_eq!(v.oldest, vr.oldest, "{ctx}");
                    assert_eq!(v.retrans, vr.retrans, "{ctx}");
                    assert_eq!(v.best, vr.best, "{ctx}");
                    assert_eq!(b.highest_sack, rf.highest_sack, "{ctx}");
                } else if what < 65 {
                    assert_eq!(b.mark_lost(3), rf.mark_lost(3), "{ctx}");
                } else if what < 75 {
                    // The sender's retransmission of the next lost segment, searched
                    // from where the last one was or (at times) from any segment.
                    if r.chance(0.3) && !rf.segs.is_empty() {
                        hint = rf.segs[r.below(rf.segs.len() as u64) as usize].start;
                    }
                    let i = b.next_lost_from(hint);
                    let j = rf.next_lost_from(hint);
                    assert_eq!(
                        i.map(|i| (b.segs[i].start, b.segs[i].pcount)),
                        j.map(|j| (rf.segs[j].start, 1)),
                        "{ctx}"
                    );
                    if let (Some(i), Some(j)) = (i, j) {
                        hint = rf.segs[j].start;
                        rf.retransmit(j, t);
                        let s = &mut b.segs[i];
                        if !s.is(RETRANS) {
                            s.flags |= RETRANS;
                            b.retrans_out += 1;
                        }
                        s.flags |= EVER_RETRANS;
                        s.sent_at = t;
                    } else {
                        hint = nxt;
                    }
                } else if what < 80 {
                    let rack = Time(now.saturating_sub(r.below(20)));
                    assert_eq!(
                        b.mark_lost_retransmissions(rack, 5),
                        rf.mark_lost_retransmissions(rack, 5),
                        "{ctx}"
                    );
                } else if what < 95 {
                    // A cumulative ACK: a segment end mostly, anywhere at times.
                    let segs = expand_ref(&rf);
                    if segs.is_empty() {
                        continue;
                    }
                    let ack = if r.chance(0.85) {
                        let s = &segs[r.below(segs.len().min(8) as u64) as usize];
                        s.0 + s.1 as u64 + (s.2 & FIN != 0) as u64
                    } else {
                        una + r.below(nxt - una + 1)
                    };
                    let c = b.ack_cum(ack);
                    let mut vr = Visit::default();
                    rf.ack_to(ack, |s| {
                        if !s.is(SACKED) {
                            vr.add(s, 1);
                        }
                    });
                    assert_eq!(c.delivered, vr.delivered, "{ctx}");
                    assert_eq!(c.retrans_acked, vr.retrans, "{ctx}");
                    assert_eq!(c.newest_sent_at, vr.newest, "{ctx}");
                    assert_eq!(c.oldest_sent_at, vr.oldest, "{ctx}");
                    assert_eq!(
                        c.best.map(|s| (s.sent_at, s.end(), s.delivered)),
                        vr.best,
                        "{ctx}"
                    );
                    una = una.max(rf.segs.front().map_or(nxt, |s| s.start));
                    hint = hint.max(una);
                } else if what < 98 {
                    if !rf.segs.is_empty() {
                        assert_eq!(b.mark_one_lost(0), rf.mark_one_lost(0), "{ctx}");
                    }
                } else {
                    b.mark_all_lost();
                    rf.mark_all_lost();
                    hint = una;
                }
                b.check().unwrap_or_else(|e| panic!("{ctx}: {e}"));
                assert_eq!(expand(&b), expand_ref(&rf), "{ctx}");
                assert_eq!(
                    (b.lost_mark, b.sacked_below_mark),
                    (rf.lost_mark, rf.sacked_below_mark),
                    "{ctx}"
                );
                assert_eq!(
                    (b.packets_out(), b.sacked_out, b.lost_out, b.retrans_out),
                    (
                        rf.segs.len() as u32,
                        rf.sacked_out,
                        rf.lost_out,
                        rf.retrans_out
                    ),
                    "{ctx}"
                );
            }
        }
    }

    /// `ack_front` (the quiet ACK's form of `ack_cum`) against `ack_cum` on two boards
    /// put through the same random buffers, SACK blocks, loss marks and retransmission
    /// marks: where it applies it removes exactly what `ack_cum` removes and reports the
    /// same delivery (every removed segment delivered, Karn's flag, the send times and the
    /// rate snapshot of the entry); where it does not, it changes nothing.
    #[test]
    fn ack_front_is_ack_cum_for_the_first_entry() {
        use sojourn_core::rng::Rng;
        const MSS: u32 = 100;
        let mut applied = 0;
        for seed in 0..300 {
            let mut r = Rng::from_seed(1000 + seed);
            let mut b = Scoreboard::new(MSS);
            let mut c = Scoreboard::new(MSS);
            let mut nxt = 1u64;
            for step in 0..80 {
                let now = step * 3 + 1;
                let what = r.below(100);
                let ctx = format!("seed {seed} step {step} op {what}");
                if what < 35 {
                    let mix = TwinSend {
                        max_segs: 6,
                        p_short: 0.3,
                        p_fin: 0.03,
                        p_retrans: 0.1,
                        p_app_limited: 0.5,
                    };
                    if mix.send(&mut r, [&mut b, &mut c], &mut nxt, now) {
                        break;
                    }
                } else if what < 50 {
                    let segs = expand(&b);
                    if segs.is_empty() {
                        continue;
                    }
                    let x = segs[r.below(segs.len() as u64) as usize].0;
                    let blk = SackBlock {
                        start: x,
                        end: x + r.below(3 * MSS as u64),
                    };
                    b.sack(blk, |_| {});
                    c.sack(blk, |_| {});
                } else if what < 55 {
                    assert_eq!(b.mark_lost(3), c.mark_lost(3), "{ctx}");
                } else if what < 60 {
                    if !b.segs.is_empty() {
                        assert_eq!(b.mark_one_lost(0), c.mark_one_lost(0), "{ctx}");
                    }
                } else {
                    let segs = expand(&b);
                    if segs.is_empty() {
                        continue;
                    }
                    let una = segs[0].0;
                    let ack = if r.chance(0.85) {
                        let s = &segs[r.below(segs.len().min(8) as u64) as usize];
                        s.0 + s.1 as u64 + (s.2 & FIN != 0) as u64
                    } else {
                        una + r.below(nxt - una + 1)
                    };
                    let before = expand(&b);
                    let mark = b.lost_mark;
                    let cum = c.ack_cum(ack);
                    match b.ack_front(ack) {
                        Some((e, k)) => {
                            applied += 1;
                            assert_eq!(cum.delivered, k as u64, "{ctx}");
                            assert_eq!(cum.retrans_acked, e.is(EVER_RETRANS), "{ctx}");
                            let t = (!e.is(EVER_RETRANS)).then_some(e.sent_at);
                            assert_eq!((cum.oldest_sent_at, cum.newest_sent_at), (t, t), "{ctx}");
                            let best = cum.best.expect("delivered");
                            assert_eq!(
                                (best.sent_at, best.delivered, best.delivered_at),
                                (e.sent_at, e.delivered, e.delivered_at),
                                "{ctx}"
                            );
                            assert_eq!(
                                (best.first_tx_at, best.app_limited),
                                (e.first_tx_at, e.app_limited),
                                "{ctx}"
                            );
                        }
                        None => {
                            assert_eq!(expand(&b), before, "{ctx}: changed");
                            assert_eq!(b.lost_mark, mark, "{ctx}: changed");
                            b.ack_cum(ack);
                        }
                    }
                }
                b.check().unwrap_or_else(|e| panic!("{ctx}: {e}"));
                assert_eq!(expand(&b), expand(&c), "{ctx}");
                assert_eq!(
                    (b.lost_mark, b.sacked_below_mark, b.highest_sack),
                    (c.lost_mark, c.sacked_below_mark, c.highest_sack),
                    "{ctx}"
                );
                assert_eq!(
                    (b.packets_out(), b.sacked_out, b.lost_out, b.retrans_out),
                    (c.packets_out(), c.sacked_out, c.lost_out, c.retrans_out),
                    "{ctx}"
                );
            }
        }
        assert!(applied > 1000, "ack_front applied {applied} times");
    }

    /// `ack_cum_clean` is `ack_cum` on a queue with nothing SACKed, lost or retransmitting:
    /// random buffers (some ever retransmitted, some carrying the FIN) acknowledged at
    /// random points, segment boundaries or not, across several buffers, give the same
    /// report (every field of the rate sample's segment) and leave the same queue.
    #[test]
    fn ack_cum_clean_is_ack_cum_on_a_clean_queue() {
        use sojourn_core::rng::Rng;
        const MSS: u32 = 100;
        let mut multi = 0;
        for seed in 0..300 {
            let mut r = Rng::from_seed(5000 + seed);
            let mut b = Scoreboard::new(MSS);
            let mut c = Scoreboard::new(MSS);
            let mut nxt = 1u64;
            for step in 0..60 {
                let now: u64 = step * 3 + 1;
                let ctx = format!("seed {seed} step {step}");
                if r.chance(0.5) {
                    let n = 1 + r.below(4) as u32;
                    let last = if r.chance(0.3) {
                        1 + r.below(MSS as u64) as u32
                    } else {
                        MSS
                    };
                    let e = Seg {
                        start: nxt,
                        len: (n - 1) * MSS + last,
                        pcount: n,
                        flags: if r.chance(0.03) { FIN } else { 0 }
                            | if r.chance(0.1) { EVER_RETRANS } else { 0 },
                        // Send times not always increasing (a retransmission's is later).
                        sent_at: Time(now.saturating_sub(r.below(3))),
                        delivered: now * 7,
                        delivered_at: Time(now / 2),
                        first_tx_at: Time(now / 3),
                        app_limited: r.chance(0.5),
                    };
                    b.push(e);
                    c.push(e);
                    nxt = e.end();
                    if e.is(FIN) {
                        break;
                    }
                    continue;
                }
                let segs = expand(&b);
                if segs.is_empty() {
                    continue;
                }
                let una = segs[0].0;
                let ack = una + r.below(nxt - una + 1);
                let entries = b.segs.len();
                let x = b.ack_cum_clean(ack);
                let y = c.ack_cum(ack);
                if entries - b.segs.len() > 1 {
                    multi += 1;
                }
                assert_eq!(format!("{x:?}"), format!("{y:?}"), "{ctx}");
                b.check().unwrap_or_else(|e| panic!("{ctx}: {e}"));
                assert_eq!(expand(&b), expand(&c), "{ctx}");
                assert_eq!(
                    (b.packets_out(), b.lost_mark),
                    (c.packets_out(), c.lost_mark),
                    "{ctx}"
                );
            }
        }
        assert!(multi > 300, "ACKs of several buffers: {multi}");
    }

    /// The SACK cache changes nothing: a board taking SACK blocks through `sack` and one
    /// taking them through `sack_uncached` hold the same entries (not only the same
    /// segments) and counters and report the same newly SACKed entries, over random
    /// buffers, blocks that mostly repeat or grow a recent one at its end (duplicate ACKs
    /// after a loss), fresh blocks on and off segment boundaries, cumulative ACKs, loss
    /// marking, retransmissions and RTOs; and the cache is used.
    #[test]
    fn the_sack_cache_changes_nothing() {
        use sojourn_core::rng::Rng;
        const MSS: u32 = 100;
        let (mut hits, mut grown) = (0, 0);
        for seed in 0..300 {
            let mut r = Rng::from_seed(9000 + seed);
            let mut b = Scoreboard::new(MSS);
            let mut c = Scoreboard::new(MSS);
            let mut nxt = 1u64;
            let mut recent: Vec<SackBlock> = Vec::new();
            for step in 0..150 {
                let now = step * 3 + 1;
                let what = r.below(100);
                let ctx = format!("seed {seed} step {step} op {what}");
                if what < 20 {
                    let mix = TwinSend {
                        max_segs: 4,
                        p_short: 0.2,
                        p_fin: 0.02,
                        p_retrans: 0.0,
                        p_app_limited: 0.0,
                    };
                    if mix.send(&mut r, [&mut b, &mut c], &mut nxt, now) {
                        break;
                    }
                } else if what < 70 {
                    let segs = expand(&b);
                    if segs.is_empty() {
                        continue;
                    }
                    let end_of =
                        |s: &(u64, u32, u8, Time)| s.0 + s.1 as u64 + (s.2 & FIN != 0) as u64;
                    let una = segs[0].0;
                    let blk = if !recent.is_empty() && r.chance(0.7) {
                        // A recent block again, or grown at its end by one or two
                        // segments (or by an odd amount, at times).
                        let old = recent[r.below(recent.len() as u64) as usize];
                        let end = if r.chance(0.3) {
                            old.end
                        } else if r.chance(0.8) {
                            segs.iter()
                                .map(end_of)
                                .filter(|&e| e > old.end)
                                .nth(r.below(2) as usize)
                                .unwrap_or(old.end)
                        } else {
                            old.end + r.below(2 * MSS as u64)
                        };
                        SackBlock {
                            start: old.start,
                            end,
                        }
                    } else {
                        let i = r.below(segs.len() as u64) as usize;
                        let start = if r.chance(0.9) {
                            segs[i].0
                        } else {
                            una + r.below(nxt - una + 1)
                        };
                        let j = (i + r.below(3) as usize).min(segs.len() - 1);
                        SackBlock {
                            start,
                            end: end_of(&segs[j]).max(start),
                        }
                    };
                    if blk.start < una {
                        continue; // a D-SACK: the sender does not process it
                    }
                    let cached = b.sack_cache.as_deref().map_or(&[][..], |c| &c.blocks[..]);
                    if cached
                        .iter()
                        .any(|x| x.start == blk.start && x.end <= blk.end && x.end > x.start)
                    {
                        hits += 1;
                        grown += cached.iter().all(|x| x.end != blk.end) as u32;
                    }
                    let (mut vb, mut vc) = (Vec::new(), Vec::new());
                    b.sack(blk, |s| vb.push(format!("{s:?}")));
                    c.sack_uncached(blk, |s| vc.push(format!("{s:?}")));
                    assert_eq!(vb, vc, "{ctx}");
                    recent.retain(|x| *x != blk);
                    recent.push(blk);
                    if recent.len() > 4 {
                        recent.remove(0);
                    }
                } else if what < 78 {
                    assert_eq!(b.mark_lost(3), c.mark_lost(3), "{ctx}");
                } else if what < 86 {
                    let (i, j) = (b.next_lost_from(0), c.next_lost_from(0));
                    assert_eq!(i, j, "{ctx}");
                    if let Some(i) = i {
                        for x in [&mut b, &mut c] {
                            let s = &mut x.segs[i];
                            s.flags |= RETRANS | EVER_RETRANS;
                            x.retrans_out += s.pcount;
                        }
                    }
                } else if what < 88 {
                    b.mark_all_lost();
                    c.mark_all_lost();
                } else {
                    let segs = expand(&b);
                    if segs.is_empty() {
                        continue;
                    }
                    let s = &segs[r.below(segs.len().min(4) as u64) as usize];
                    let ack = s.0 + s.1 as u64 + (s.2 & FIN != 0) as u64;
                    assert_eq!(
                        format!("{:?}", b.ack_cum(ack)),
                        format!("{:?}", c.ack_cum(ack)),
                        "{ctx}"
                    );
                }
                b.check().unwrap_or_else(|e| panic!("{ctx}: {e}"));
                let raw =
                    |x: &Scoreboard| x.segs.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>();
                assert_eq!(raw(&b), raw(&c), "{ctx}: entries");
                assert_eq!(
                    (
                        b.packets_out(),
                        b.sacked_out,
                        b.lost_out,
                        b.retrans_out,
                        b.highest_sack
                    ),
                    (
                        c.packets_out(),
                        c.sacked_out,
                        c.lost_out,
                        c.retrans_out,
                        c.highest_sack
                    ),
                    "{ctx}"
                );
                assert_eq!(
                    (b.lost_mark, b.sacked_below_mark),
                    (c.lost_mark, c.sacked_below_mark),
                    "{ctx}"
                );
            }
        }
        assert!(
            hits > 3000 && grown > 1000,
            "cache hits {hits}, of grown blocks {grown}"
        );
    }

    /// A literal case: a 5-segment buffer of 100-byte segments at sequence 1. An ACK of
    /// 201 takes its first two segments (the entry keeps 3 from 201); an ACK of 251 ends
    /// inside a segment and takes nothing more; the ACK of 501 takes the rest.
    #[test]
    fn ack_front_trims_then_removes_the_first_buffer() {
        let mut b = Scoreboard::new(100);
        let e = Seg {
            start: 1,
            len: 500,
            pcount: 5,
            flags: 0,
            sent_at: Time(9),
            delivered: 0,
            delivered_at: Time::ZERO,
            first_tx_at: Time::ZERO,
            app_limited: false,
        };
        b.push(e);
        assert_eq!(b.ack_front(201).map(|(_, k)| k), Some(2));
        assert_eq!(
            (b.segs[0].start, b.segs[0].len, b.segs[0].pcount),
            (201, 300, 3)
        );
        assert_eq!(b.packets_out(), 3);
        assert!(b.ack_front(251).is_none());
        assert_eq!(b.ack_front(501).map(|(_, k)| k), Some(3));
        assert!(b.segs.is_empty());
        assert_eq!(b.packets_out(), 0);
    }
}
