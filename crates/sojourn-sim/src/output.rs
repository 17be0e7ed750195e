//! The simulator's results: summary.json from a finished [`Sim`], with the tables built by
//! the engines' shared writers ([`sojourn_record::output`]; docs/output-schema.md).

use crate::sim::Sim;
use serde_json::{json, Map, Value as J};
use sojourn_core::qdisc::DropReason;
use sojourn_core::Qdisc;
use sojourn_record::flows::FlowRecord;
use sojourn_record::output::{
    flow_columns, hist_ms, histogram_columns, packet_columns, timeseries_columns, FctFrom,
    FlowSummary, RunOutput, SCHEMA_VERSION,
};

/// Builds the outputs of a finished simulation.
pub fn collect(sim: &mut Sim, fct_from: FctFrom) -> RunOutput {
    collect_after_release(sim, fct_from, FlowSummary::default())
}

/// [`collect`] for a run that handed finished flow records out ([`crate::run_streaming`]):
/// `released` summarises them, and `flows` holds only the records still held.
pub fn collect_after_release(sim: &mut Sim, fct_from: FctFrom, released: FlowSummary) -> RunOutput {
    let inside = sim.in_network();
    let links = vec![0; sim.links.len()];
    assemble(sim, &mut [], &links, inside, fct_from, released)
}

/// [`collect`] for a run cut over threads (`parallel.rs`): `main` holds the merged flows,
/// counts and time series; each link's own state is in the partition `owner_of_link`
/// names (0 for `main`, `k` for `others[k - 1]`).
pub(crate) fn collect_merged(
    main: &mut Sim,
    others: &mut [Sim],
    owner_of_link: &[usize],
    inside: u64,
    fct_from: FctFrom,
) -> RunOutput {
    assemble(
        main,
        others,
        owner_of_link,
        inside,
        fct_from,
        FlowSummary::default(),
    )
}

fn assemble(
    sim: &mut Sim,
    others: &mut [Sim],
    owner_of_link: &[usize],
    inside: u64,
    fct_from: FctFrom,
    released: FlowSummary,
) -> RunOutput {
    let series = std::mem::take(&mut sim.series);
    let packet_log = std::mem::take(&mut sim.packet_log);
    let sim = &*sim;
    let exp = &sim.exp;
    let end = sim.end;
    let warm = sim.warmup_end;
    let a = sim.acct;
    let owner = |i: usize| -> &Sim {
        match owner_of_link[i] {
            0 => sim,
            k => &others[k - 1],
        }
    };

    let mut links = Map::new();
    for i in 0..sim.links.len() {
        let o = owner(i);
        let l = &o.links[i];
        let measured = l.capacity_bits_between(l.stats.since, end);
        let wire_bits =
            (l.stats.tx_bytes + l.stats.tx_pkts * l.dev.framing_bytes as u64) as f64 * 8.0;
        let mut drops = Map::new();
        for r in DropReason::ALL {
            let n = l.stats.drops[r as usize];
            if n > 0 {
                drops.insert(r.name().to_string(), json!(n));
            }
        }
        let period = (end - l.stats.since).as_secs_f64();
        // `json!` serialises each value it is given (a deep copy of a map): the nested
        // maps are moved in after it.
        let mut entry = json!({
            "from": sim.nodes[l.from as usize].name,
            "to": sim.nodes[l.to as usize].name,
            "rate_bps": match l.dev.rate() { crate::link::RateModel::Constant(r) => json!(r), _ => J::Null },
            "delay_ms": l.prop.delay.as_millis_f64(),
            "qdisc": l.qdisc_desc,
            "tx_packets": l.stats.tx_pkts,
            "tx_bytes": l.stats.tx_bytes,
            "throughput_bps": if period > 0.0 { l.stats.tx_bytes as f64 * 8.0 / period } else { 0.0 },
            "utilisation": if measured > 0.0 { wire_bits / measured } else { 0.0 },
            "drops_total": l.stats.drops.iter().sum::<u64>(),
            "ecn_marks": l.dev.qdisc.ecn_marks() - l.stats.marks_at_reset,
            "queue_packets_at_end": o.queue_packets(i),
            "ring_packets_at_end": l.dev.ring_len(),
        });
        let o = entry.as_object_mut().expect("an object");
        o.insert("drops".to_string(), J::Object(drops));
        o.insert("sojourn_ms".to_string(), hist_ms(&l.stats.sojourn));
        links.insert(l.name.clone(), entry);
    }

    // Flows that started after warm-up.
    let mut flow_summary = released;
    for r in sim.flows.iter() {
        flow_summary.add(r, warm, end, fct_from);
    }
    let mut summary = json!({
        "schema": "sojourn.summary",
        "schema_version": SCHEMA_VERSION,
        "sojourn_version": env!("CARGO_PKG_VERSION"),
        "experiment": exp.name,
        "description": exp.description,
        "seed": sim.seed,
        "duration_s": exp.duration.as_secs_f64(),
        "warmup_s": exp.warmup.as_secs_f64(),
        "events": sim.events_processed,
        "accounting": {
            "created": a.created,
            "delivered": a.delivered,
            "dropped": a.dropped,
            "in_network": inside,
            "conserved": a.created == a.delivered + a.dropped + inside,
        },
    });
    let o = summary.as_object_mut().expect("an object");
    o.insert("links".to_string(), J::Object(links));
    o.insert("flows".to_string(), flow_summary.json(fct_from));
    if let Some(apps) = sim.apps_summary(end) {
        o.insert("apps".to_string(), apps);
    }
    if let Some(w) = &sim.wifi {
        let names: Vec<String> = sim.nodes.iter().map(|n| n.name.clone()).collect();
        let period = (end - warm).as_secs_f64();
        o.insert("wifi".to_string(), w.summary(period, &names));
    }

    let held: Vec<&FlowRecord> = sim.flows.iter().collect();
    let flows = flow_columns(&held, |n| sim.nodes[n as usize].name.clone(), end, fct_from);

    let (timeseries, series_names) = timeseries_columns(series);
    let packets = if sim.exp.record.packet_links.is_empty() {
        None
    } else {
        let links = &sim.links;
        Some(packet_columns(packet_log, |l| {
            links[l as usize].name.clone()
        }))
    };

    // histograms.parquet: the buckets of each link's sojourn histogram (measured after the
    // warm-up, the same samples as summary.json's sojourn_ms).
    let histograms = histogram_columns((0..sim.links.len()).map(|i| {
        let l = &owner(i).links[i];
        (l.name.as_str(), &l.stats.sojourn)
    }));

    let probes = sim.probe_columns();
    RunOutput {
        probes,
        summary,
        flows,
        timeseries,
        series_names,
        packets,
        histograms,
    }
}
