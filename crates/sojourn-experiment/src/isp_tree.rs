//! The expansion of `[topology] kind = "isp"` into the experiment's nodes, links and HTB
//! trees (docs/isp.md; the tree's types are [`crate::isp`]'s). Apart from the model's types
//! so that the model does not import the parser that builds into it: `load` dispatches
//! here, this module builds with the model's builders, and the model holds the plan.

use crate::dist::IntervalDist;
use crate::experiment::{add_link, add_node, parse_link_spec, Experiment, LinkSpec};
use crate::isp::{IspPlan, PlanMix, Subscriber, DEFAULT_RTT, MAX_MINOR};
use crate::link::LinkRate;
use sojourn_core::params::{ConfError, ConfResult, Params, Table, Value};
use sojourn_core::rng::Rng;
use sojourn_core::Duration;

/// Parses `[topology] kind = "isp"` into nodes and links of `exp` and sets `exp.isp` and
/// `exp.pairs` (the active subscribers' (server, subscriber) pairs).
pub(crate) fn parse_isp(exp: &mut Experiment, p: &mut Params) -> ConfResult<()> {
    let base = exp.base_dir.clone();
    let n = p.u32("subscribers", 0, 0, 1_000_000)?;
    if n == 0 {
        return Err(p.err(
            "subscribers",
            "required: the number of subscribers (at least 1)",
        ));
    }
    let nservers = p.u32("servers", 1, 1, 10_000)?;
    // Access routers: subscriber i hangs off access router i mod K, each router behind its
    // own uplink and HTB trees (one Linux HTB holds at most 65,535 classes).
    let nacc = p.u32("access_routers", 1, 1, 1024)?;
    if nacc > n {
        return Err(p.err(
            "access_routers",
            format!("{nacc} access routers for {n} subscribers: every router needs one"),
        ));
    }
    let per_tree = n.div_ceil(nacc);

    // The uplink (downstream) and its upstream direction: rate required, the qdisc is the
    // generated HTB tree.
    if !p.has("uplink") {
        return Err(p.err(
            "uplink",
            "required: { rate = \"10Gbit\" } (the shaped link towards the subscribers)",
        ));
    }
    let uplink = fixed_link(p, "uplink", &base)?;
    let uplink_bps = constant_rate(&uplink, &p.key_path("uplink"))?;
    let upstream = fixed_link(p, "upstream", &base)?.or(&LinkSpec {
        qdisc: None,
        ..uplink.clone()
    });
    let upstream_bps = constant_rate(&upstream, &p.key_path("upstream"))?;

    let plans = parse_plans(p, uplink_bps, upstream_bps)?;
    let fastest = plans
        .iter()
        .map(|m| m.down_bps.max(m.up_bps))
        .max()
        .unwrap_or(0);

    let line = fixed_link(p, "line", &base)?.or(&LinkSpec {
        rate: Some(LinkRate::Constant(uplink_bps.max(upstream_bps))),
        ..LinkSpec::default()
    });
    let line_bps = constant_rate(&line, &p.key_path("line"))?;
    for (i, m) in plans.iter().enumerate() {
        if m.down_bps.max(m.up_bps) > line_bps {
            return Err(ConfError::new(
                format!("topology.plans[{i}]"),
                format!(
                    "a plan of {} is faster than the subscriber line (topology.line.rate, {})",
                    fmt_bps(m.down_bps.max(m.up_bps)),
                    fmt_bps(line_bps)
                ),
            ));
        }
    }
    let server_link = fixed_link(p, "server_link", &base)?.or(&LinkSpec {
        rate: Some(LinkRate::Constant(
            uplink_bps.max(upstream_bps).max(fastest).saturating_mul(4),
        )),
        ..LinkSpec::default()
    });
    constant_rate(&server_link, &p.key_path("server_link"))?;

    // Sites: an optional level of classes between the root and the subscribers.
    let (nsites, site_down, site_up) = match p.table_opt("sites")? {
        None => (0, uplink_bps, upstream_bps),
        Some(t) => {
            let mut sp = Params::new(p.key_path("sites"), t);
            let count = sp.u32("count", 0, 0, 10_000)?;
            if count == 0 {
                return Err(sp.err("count", "required: the number of sites (at least 1)"));
            }
            let down = sp.rate_opt("rate")?.unwrap_or(uplink_bps);
            let up = sp.rate_opt("up")?.unwrap_or(upstream_bps);
            if down == 0 || up == 0 {
                return Err(sp.err("rate", "must be positive"));
            }
            if down > uplink_bps {
                return Err(sp.err(
                    "rate",
                    format!(
                        "a site of {} is faster than the uplink ({})",
                        fmt_bps(down),
                        fmt_bps(uplink_bps)
                    ),
                ));
            }
            if up > upstream_bps {
                return Err(sp.err(
                    "up",
                    format!(
                        "a site of {} is faster than the upstream link ({})",
                        fmt_bps(up),
                        fmt_bps(upstream_bps)
                    ),
                ));
            }
            sp.finish()?;
            (count, down, up)
        }
    };
    if nsites > per_tree {
        return Err(p.err(
            "sites.count",
            format!("{nsites} sites for {per_tree} subscribers per tree: every site needs one"),
        ));
    }
    let first_sub_minor = 2 + nsites;
    if first_sub_minor as u64 + per_tree as u64 - 1 > MAX_MINOR as u64 {
        return Err(p.err(
            "subscribers",
            format!(
                "{n} subscribers and {nsites} sites do not fit one HTB: class ids are \
                 major:minor with a 16-bit minor, so at most {} subscribers per access \
                 router (as Linux); split them with access_routers = {}",
                MAX_MINOR + 1 - first_sub_minor,
                n.div_ceil(MAX_MINOR + 1 - first_sub_minor)
            ),
        ));
    }
    for (i, m) in plans.iter().enumerate() {
        if m.ceil_down_bps > site_down || m.ceil_up_bps > site_up {
            return Err(ConfError::new(
                format!("topology.plans[{i}]"),
                "its ceil is faster than its site's rate (topology.sites)",
            ));
        }
    }

    let addresses = parse_addresses(p, n)?;
    let leaf = p.raw("leaf").cloned();
    // HTB's r2q (quantum = rate / r2q, clamped to [1000, 200000] B): with tc's 10 every
    // plan above 16 Mbit/s gets the same quantum, so a congested uplink is shared equally,
    // not by plan (docs/isp.md); a larger r2q keeps the quanta in proportion to the plans.
    let r2q = match p.raw("r2q") {
        None => None,
        Some(_) => Some(p.u32("r2q", 10, 1, u32::MAX)?),
    };
    let rtt = IntervalDist::parse(p, "rtt", false)?.unwrap_or(IntervalDist::Fixed(DEFAULT_RTT));
    let active = p.f64_in("active", 1.0, 0.0, 1.0)?;
    let nactive = (active * n as f64).round() as usize;
    if nactive == 0 {
        return Err(p.err(
            "active",
            format!("{active} of {n} subscribers selects none (at least one must be active)"),
        ));
    }

    // Per-direction fixed delay on a server→subscriber path; the rest of half the RTT is
    // the subscriber line's delay (each direction).
    let fixed =
        server_link.delay.unwrap_or(Duration::ZERO) + uplink.delay.unwrap_or(Duration::ZERO);
    let fixed_up =
        server_link.delay.unwrap_or(Duration::ZERO) + upstream.delay.unwrap_or(Duration::ZERO);
    let fixed = fixed.max(fixed_up);
    if line.delay.is_some() {
        return Err(p.err(
            "line.delay",
            "set by `rtt` (half the subscriber's RTT, less the uplink's and server link's delays)",
        ));
    }

    // Plans: counts by the largest remainder of share × n, then a seeded shuffle so plans
    // mix across sites and subscriber numbers.
    let mut counts: Vec<usize> = plans
        .iter()
        .map(|m| (m.share * n as f64).floor() as usize)
        .collect();
    let mut left = n as usize - counts.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..plans.len()).collect();
    order.sort_by(|&a, &b| {
        let ra = plans[a].share * n as f64 - counts[a] as f64;
        let rb = plans[b].share * n as f64 - counts[b] as f64;
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &j in order.iter().cycle() {
        if left == 0 {
            break;
        }
        counts[j] += 1;
        left -= 1;
    }
    let mut plan_of: Vec<u32> = Vec::with_capacity(n as usize);
    for (j, &c) in counts.iter().enumerate() {
        plan_of.extend(std::iter::repeat_n(j as u32, c));
    }
    let mut rng = Rng::stream(exp.seed, "isp-plan", 0);
    shuffle(&mut plan_of, &mut rng);
    // Active subscribers: a seeded sample of exactly round(active × n).
    let mut pick: Vec<u32> = (0..n).collect();
    let mut rng = Rng::stream(exp.seed, "isp-active", 0);
    for i in 0..nactive {
        let j = i + rng.below((n as usize - i) as u64) as usize;
        pick.swap(i, j);
    }
    let mut is_active = vec![false; n as usize];
    for &i in &pick[..nactive] {
        is_active[i as usize] = true;
    }

    // Nodes and links.
    let mut servers = Vec::with_capacity(nservers as usize);
    for k in 0..nservers {
        servers.push(add_node(exp, &format!("server{k}"), "topology.servers")?);
    }
    let core = add_node(exp, "core", "topology")?;
    let mut access = Vec::with_capacity(nacc as usize);
    for a in 0..nacc {
        let name = if nacc == 1 {
            "access".to_string()
        } else {
            format!("access{a}")
        };
        access.push(add_node(exp, &name, "topology.access_routers")?);
    }
    let pfifo = Value::Str("pfifo".into());
    for (k, &s) in servers.iter().enumerate() {
        add_link(
            exp,
            format!("server{k}.up"),
            s,
            core,
            &server_link,
            pfifo.clone(),
            "topology.server_link",
        )?;
        add_link(
            exp,
            format!("server{k}.down"),
            core,
            s,
            &server_link,
            pfifo.clone(),
            "topology.server_link",
        )?;
    }

    let mut subscribers = Vec::with_capacity(n as usize);
    let mut rtt_rng = Rng::stream(exp.seed, "isp-rtt", 0);
    for i in 0..n {
        let name = format!("sub{i}");
        let node = add_node(exp, &name, "topology.subscribers")?;
        let rtt_i = rtt.draw(&mut rtt_rng);
        let half = Duration(rtt_i.0 / 2);
        if half < fixed {
            return Err(p.err(
                "rtt",
                format!(
                    "an RTT of {rtt_i} is shorter than twice the fixed one-way delay of the \
                     server link and uplink ({fixed})"
                ),
            ));
        }
        let mut l = line.clone();
        l.delay = Some(half - fixed);
        let acc = i % nacc;
        add_link(
            exp,
            format!("{name}.down"),
            access[acc as usize],
            node,
            &l,
            pfifo.clone(),
            "topology.line",
        )?;
        add_link(
            exp,
            format!("{name}.up"),
            node,
            access[acc as usize],
            &l,
            pfifo.clone(),
            "topology.line",
        )?;
        subscribers.push(Subscriber {
            name,
            node,
            plan: plan_of[i as usize],
            site: if nsites > 0 { i % nsites } else { 0 },
            rtt: rtt_i,
            server: servers[(i % nservers) as usize],
            active: is_active[i as usize],
            access: acc,
            // Minors count the subscribers of this router's tree.
            classid: format!("1:{:x}", first_sub_minor + i / nacc),
        });
    }

    let mut plan = IspPlan {
        uplink_bps,
        upstream_bps,
        plans,
        subscribers,
        servers,
        sites: nsites,
        access_routers: nacc,
        addresses,
        r2q,
        leaf: leaf
            .as_ref()
            .map_or_else(|| "pfifo".to_string(), crate::experiment::qdisc_label),
    };
    let name = |base: &str, a: u32| {
        if nacc == 1 {
            base.to_string()
        } else {
            format!("{base}{a}")
        }
    };
    for a in 0..nacc {
        let down_tree = htb_tree(&plan, a, Direction::Down, site_down, leaf.as_ref());
        let up_tree = htb_tree(&plan, a, Direction::Up, site_up, leaf.as_ref());
        // The generated tree as a label would be thousands of classes long.
        let label = format!(
            "htb({} subscribers{}, leaf={})",
            plan.subscribers.iter().filter(|s| s.access == a).count(),
            if nsites > 0 {
                format!(", {nsites} sites")
            } else {
                String::new()
            },
            plan.leaf
        );
        let mut u = uplink.clone();
        u.qdisc = Some(down_tree);
        add_link(
            exp,
            name("uplink", a),
            core,
            access[a as usize],
            &u,
            pfifo.clone(),
            "topology.uplink",
        )?;
        let l = exp.links.len() - 1;
        exp.links[l].qdisc_desc = label.clone();
        let mut u = upstream.clone();
        u.qdisc = Some(up_tree);
        add_link(
            exp,
            name("upstream", a),
            access[a as usize],
            core,
            &u,
            pfifo.clone(),
            "topology.upstream",
        )?;
        let l = exp.links.len() - 1;
        exp.links[l].qdisc_desc = label;
    }
    plan.sites = nsites;
    exp.pairs = plan.active_pairs();
    exp.isp = Some(plan);
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Down,
    Up,
}

/// The HTB qdisc value of one direction of access router `access`: root class `1:1` at the link's rate, site
/// classes `1:2..`, one class per subscriber, an address filter per subscriber
/// (`dst` downstream, `src` upstream).
fn htb_tree(
    plan: &IspPlan,
    access: u32,
    dir: Direction,
    site_bps: u64,
    leaf: Option<&Value>,
) -> Value {
    let root_bps = match dir {
        Direction::Down => plan.uplink_bps,
        Direction::Up => plan.upstream_bps,
    };
    let s = |v: String| Value::Str(v);
    let rate = |bps: u64| Value::Str(format!("{bps}bit"));
    let mut classes = Vec::with_capacity(plan.subscribers.len() + plan.sites as usize + 1);
    classes.push(Value::Table(Table(vec![
        ("classid".into(), s("1:1".into())),
        ("rate".into(), rate(root_bps)),
        ("ceil".into(), rate(root_bps)),
    ])));
    for k in 0..plan.sites {
        classes.push(Value::Table(Table(vec![
            ("classid".into(), s(format!("1:{:x}", 2 + k))),
            ("parent".into(), s("1:1".into())),
            ("rate".into(), rate(site_bps)),
            ("ceil".into(), rate(site_bps)),
        ])));
    }
    let mut filters = Vec::with_capacity(plan.subscribers.len());
    for sub in plan.subscribers.iter().filter(|s| s.access == access) {
        let m = &plan.plans[sub.plan as usize];
        let (r, c) = match dir {
            Direction::Down => (m.down_bps, m.ceil_down_bps),
            Direction::Up => (m.up_bps, m.ceil_up_bps),
        };
        let parent = if plan.sites > 0 {
            format!("1:{:x}", 2 + sub.site)
        } else {
            "1:1".into()
        };
        let mut t = vec![
            ("classid".into(), s(sub.classid.clone())),
            ("parent".into(), s(parent)),
            ("rate".into(), rate(r)),
            ("ceil".into(), rate(c)),
        ];
        if let Some(l) = leaf {
            t.push(("qdisc".into(), l.clone()));
        }
        classes.push(Value::Table(Table(t)));
        let key = match dir {
            Direction::Down => "dst",
            Direction::Up => "src",
        };
        // The node id itself: HTB's address filter matches a simulator node by its id
        // (the address whose low 32 bits are the id); deploy maps it to the node's address.
        filters.push(Value::Table(Table(vec![
            (key.into(), Value::Int(sub.node as i64)),
            ("classid".into(), s(sub.classid.clone())),
        ])));
    }
    let mut t = vec![("kind".into(), s("htb".into()))];
    if let Some(r) = plan.r2q {
        t.push(("r2q".into(), Value::Int(i64::from(r))));
    }
    t.push(("classes".into(), Value::Array(classes)));
    t.push(("filters".into(), Value::Array(filters)));
    Value::Table(Table(t))
}

/// Reads `topology.plans`: a non-empty list of `{ down, up, share, ceil_down?, ceil_up? }`.
fn parse_plans(p: &mut Params, uplink_bps: u64, upstream_bps: u64) -> ConfResult<Vec<PlanMix>> {
    let path = p.key_path("plans");
    let entries = match p.raw("plans") {
        None => {
            return Err(ConfError::new(
                path,
                "required: a list like [{ down = \"100Mbit\", up = \"20Mbit\", share = 1.0 }]",
            ))
        }
        Some(Value::Array(a)) if a.is_empty() => {
            return Err(ConfError::new(path, "needs at least one plan"))
        }
        Some(Value::Array(a)) => a,
        Some(v) => {
            return Err(ConfError::new(
                path,
                format!("expected a list of plan tables, got {}", v.type_name()),
            ))
        }
    };
    let mut out = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let ep = format!("{path}[{i}]");
        let Value::Table(t) = e else {
            return Err(ConfError::new(ep, "expected a table { down, up, share }"));
        };
        let mut q = Params::new(ep.clone(), t);
        let req = |q: &mut Params, k: &str| -> ConfResult<u64> {
            match q.rate_opt(k)? {
                None => Err(q.err(k, "required (a rate, e.g. \"100Mbit\")")),
                Some(0) => Err(q.err(k, "must be positive")),
                Some(r) => Ok(r),
            }
        };
        let down = req(&mut q, "down")?;
        let up = req(&mut q, "up")?;
        let share = q.f64("share", 1.0)?;
        if share.is_nan() || share <= 0.0 || !share.is_finite() {
            return Err(q.err("share", format!("must be positive, got {share}")));
        }
        let ceil_down = q.rate_opt("ceil_down")?.unwrap_or(down);
        let ceil_up = q.rate_opt("ceil_up")?.unwrap_or(up);
        if ceil_down < down {
            return Err(q.err("ceil_down", "must not be below `down` (HTB: ceil ≥ rate)"));
        }
        if ceil_up < up {
            return Err(q.err("ceil_up", "must not be below `up` (HTB: ceil ≥ rate)"));
        }
        if ceil_down > uplink_bps {
            return Err(q.err(
                if q.has("ceil_down") {
                    "ceil_down"
                } else {
                    "down"
                },
                format!(
                    "a plan of {} is faster than the uplink ({})",
                    fmt_bps(ceil_down),
                    fmt_bps(uplink_bps)
                ),
            ));
        }
        if ceil_up > upstream_bps {
            return Err(q.err(
                if q.has("ceil_up") { "ceil_up" } else { "up" },
                format!(
                    "a plan of {} is faster than the upstream link ({})",
                    fmt_bps(ceil_up),
                    fmt_bps(upstream_bps)
                ),
            ));
        }
        q.finish()?;
        out.push(PlanMix {
            down_bps: down,
            up_bps: up,
            ceil_down_bps: ceil_down,
            ceil_up_bps: ceil_up,
            share,
        });
    }
    let total: f64 = out.iter().map(|m| m.share).sum();
    for m in &mut out {
        m.share /= total;
    }
    Ok(out)
}

/// A link spec under `key` that takes no `qdisc` where the tree is generated, and no rate
/// schedule or trace (the HTB's rates are constants).
fn fixed_link(p: &mut Params, key: &str, base: &std::path::Path) -> ConfResult<LinkSpec> {
    let mut lp = p.child(key)?;
    let spec = parse_link_spec(&mut lp, base)?;
    lp.finish()?;
    if spec.qdisc.is_some() && (key == "uplink" || key == "upstream") {
        return Err(ConfError::new(
            format!("topology.{key}.qdisc"),
            "generated by the isp topology (an HTB tree); choose the leaves with topology.leaf",
        ));
    }
    Ok(spec)
}

fn constant_rate(spec: &LinkSpec, path: &str) -> ConfResult<u64> {
    match &spec.rate {
        Some(LinkRate::Constant(r)) => Ok(*r),
        None => Err(ConfError::new(
            format!("{path}.rate"),
            "required (e.g. rate = \"10Gbit\")",
        )),
        Some(_) => Err(ConfError::new(
            format!("{path}.rate"),
            "must be a constant rate in an isp topology (no schedule or trace)",
        )),
    }
}

/// Fisher–Yates with the model's random stream.
fn shuffle<T>(v: &mut [T], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

fn fmt_bps(b: u64) -> String {
    if b.is_multiple_of(1_000_000_000) {
        format!("{}Gbit", b / 1_000_000_000)
    } else if b.is_multiple_of(1_000_000) {
        format!("{}Mbit", b / 1_000_000)
    } else if b.is_multiple_of(1000) {
        format!("{}Kbit", b / 1000)
    } else {
        format!("{b}bit")
    }
}

/// `addresses = "100.64.0.0/10"`: an IPv4 or IPv6 prefix with room for every subscriber
/// (its network address and, for IPv4, its broadcast address left out).
fn parse_addresses(p: &mut Params, n: u32) -> ConfResult<Option<(std::net::IpAddr, u8)>> {
    let Some(text) = p.str_opt("addresses")? else {
        return Ok(None);
    };
    let bad = |m: String| p.err("addresses", m);
    let (ip, len) = text
        .split_once('/')
        .ok_or_else(|| bad(format!("{text:?} is not a prefix like \"100.64.0.0/10\"")))?;
    let ip: std::net::IpAddr = ip
        .parse()
        .map_err(|_| bad(format!("{ip:?} is not an IP address")))?;
    let bits = if ip.is_ipv4() { 32 } else { 128 };
    let len: u8 = match len.parse() {
        Ok(l) if l <= bits => l,
        _ => return Err(bad(format!("prefix length {len:?} is not in 0..{bits}"))),
    };
    let host_bits = u32::from(bits - len);
    // IPv4 leaves the network and broadcast addresses out; IPv6 only the network's.
    let room: u128 = if host_bits >= 127 {
        u128::MAX
    } else {
        (1u128 << host_bits).saturating_sub(if ip.is_ipv4() { 2 } else { 1 })
    };
    if room < u128::from(n) {
        return Err(bad(format!(
            "{text} holds {room} host addresses, fewer than the {n} subscribers"
        )));
    }
    let masked = match ip {
        std::net::IpAddr::V4(a) => {
            let m = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            std::net::IpAddr::V4((u32::from(a) & m).into())
        }
        std::net::IpAddr::V6(a) => {
            let m = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            std::net::IpAddr::V6((u128::from(a) & m).into())
        }
    };
    Ok(Some((masked, len)))
}
