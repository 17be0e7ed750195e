//! Distributions of workload generators: transfer sizes ([`SizeDist`]) and time intervals
//! ([`IntervalDist`]: think times, arrival gaps, thin-stream message gaps). This is the one
//! grammar and the one sampler of sizes: Python's `sojourn.dists` parses and draws through
//! it (the `sojourn._engine` module), so both sides agree sample for sample.
//!
//! Sizes:
//! - `fixed`, `uniform` (bytes, inclusive), `exponential` (mean);
//! - `pareto`: bounded Pareto with shape α on [min, max] (seed 000, Table II), drawn by
//!   inverting its CDF `F(x) = (1 − (L/x)^α) / (1 − (L/H)^α)`; with `grid = n` the draw is
//!   rounded to the nearest of n points evenly spaced in log scale between min and max
//!   (a discrete log-grid variant, as traffic generators that sample a tabulated CDF do);
//! - `choice`: one of a list of sizes, uniformly (seed 002 §6.1 small files);
//! - `empirical`: a CDF file of `bytes probability` lines (non-decreasing), sampled by
//!   linear interpolation between points.

use sojourn_core::params::{ConfError, ConfResult, Params, Value};
use sojourn_core::rng::Rng;
use sojourn_core::Duration;
use std::path::Path;

#[derive(Clone, Debug, PartialEq)]
pub enum SizeDist {
    Fixed(u64),
    Uniform {
        min: u64,
        max: u64,
    },
    Exponential {
        mean: f64,
    },
    BoundedPareto {
        alpha: f64,
        min: f64,
        max: f64,
        grid: u32,
    },
    Choice(Vec<u64>),
    Empirical(Vec<(f64, f64)>),
}

impl SizeDist {
    /// One size in bytes (at least 1).
    pub fn draw(&self, rng: &mut Rng) -> u64 {
        let x = match self {
            SizeDist::Fixed(b) => *b as f64,
            SizeDist::Uniform { min, max } => (*min + rng.below(max - min + 1)) as f64,
            SizeDist::Exponential { mean } => rng.exp(*mean),
            SizeDist::BoundedPareto {
                alpha,
                min,
                max,
                grid,
            } => {
                let u = rng.f64();
                let ratio = (min / max).powf(*alpha);
                let x = min / (1.0 - u * (1.0 - ratio)).powf(1.0 / alpha);
                if *grid >= 2 {
                    let n = (*grid - 1) as f64;
                    let k = ((x / min).ln() / (max / min).ln() * n).round();
                    min * (max / min).powf(k / n)
                } else {
                    x
                }
            }
            SizeDist::Choice(v) => v[rng.below(v.len() as u64) as usize] as f64,
            SizeDist::Empirical(pts) => {
                let u = rng.f64();
                let i = pts.partition_point(|p| p.1 < u);
                if i == 0 {
                    pts[0].0
                } else if i >= pts.len() {
                    pts[pts.len() - 1].0
                } else {
                    let (x0, p0) = pts[i - 1];
                    let (x1, p1) = pts[i];
                    if p1 > p0 {
                        x0 + (x1 - x0) * (u - p0) / (p1 - p0)
                    } else {
                        x1
                    }
                }
            }
        };
        (x.round() as u64).max(1)
    }

    /// The mean size in bytes (analytic; for the log grid, of the drawn whole-byte law).
    pub fn mean(&self) -> f64 {
        match self {
            SizeDist::Fixed(b) => *b as f64,
            SizeDist::Uniform { min, max } => (*min + *max) as f64 / 2.0,
            SizeDist::Exponential { mean } => *mean,
            SizeDist::BoundedPareto {
                alpha,
                min,
                max,
                grid,
            } => {
                let (a, l, h) = (*alpha, *min, *max);
                if *grid >= 2 {
                    // The drawn law: atom k (rounded to whole bytes) carries the
                    // probability of the log-space cell [k − ½, k + ½] around it.
                    let n = (*grid - 1) as f64;
                    let cdf = |x: f64| (1.0 - (l / x).powf(a)) / (1.0 - (l / h).powf(a));
                    let at = |k: f64| l * (h / l).powf(k / n);
                    return (0..*grid)
                        .map(|k| {
                            let k = k as f64;
                            let lo = if k == 0.0 { l } else { at(k - 0.5) };
                            let hi = if k == n { h } else { at(k + 0.5) };
                            at(k).round().max(1.0) * (cdf(hi) - cdf(lo))
                        })
                        .sum();
                }
                if (a - 1.0).abs() < 1e-12 {
                    (h * l / (h - l)) * (h / l).ln()
                } else {
                    l.powf(a) / (1.0 - (l / h).powf(a)) * a / (a - 1.0)
                        * (1.0 / l.powf(a - 1.0) - 1.0 / h.powf(a - 1.0))
                }
            }
            SizeDist::Choice(v) => v.iter().sum::<u64>() as f64 / v.len() as f64,
            SizeDist::Empirical(pts) => {
                let mut m = pts[0].0 * pts[0].1;
                for w in pts.windows(2) {
                    m += (w[1].1 - w[0].1) * (w[0].0 + w[1].0) / 2.0;
                }
                m
            }
        }
    }

    /// Reads `key`: a byte size (fixed) or a table with `dist`.
    pub fn parse(p: &mut Params, key: &str, base_dir: &Path) -> ConfResult<Option<SizeDist>> {
        let path = p.key_path(key);
        let t = match p.raw(key) {
            None => return Ok(None),
            Some(Value::Table(t)) => t,
            Some(_) => {
                let b = p.bytes(key, 0)?;
                if b == 0 {
                    return Err(ConfError::new(path, "must be positive"));
                }
                return Ok(Some(SizeDist::Fixed(b)));
            }
        };
        let mut q = Params::new(path.clone(), t);
        let kind = q.choice(
            "dist",
            &[
                "fixed",
                "uniform",
                "exponential",
                "pareto",
                "choice",
                "empirical",
            ],
            "fixed",
        )?;
        let req = |q: &mut Params, k: &str| -> ConfResult<u64> {
            match q.bytes_opt(k)? {
                Some(0) => Err(q.err(k, "must be positive")),
                Some(b) => Ok(b),
                None => Err(q.err(k, "required (bytes)")),
            }
        };
        let d = match kind {
            "fixed" => SizeDist::Fixed(req(&mut q, "value")?),
            "uniform" => {
                let min = req(&mut q, "min")?;
                let max = req(&mut q, "max")?;
                if max < min {
                    return Err(q.err("max", "must not be below `min`"));
                }
                SizeDist::Uniform { min, max }
            }
            "exponential" => SizeDist::Exponential {
                mean: req(&mut q, "mean")? as f64,
            },
            "pareto" => {
                let alpha = q.f64_in("alpha", 1.2, 0.01, 100.0)?;
                let min = req(&mut q, "min")? as f64;
                let max = req(&mut q, "max")? as f64;
                if max <= min {
                    return Err(q.err("max", "must be above `min`"));
                }
                let grid = q.u32("grid", 0, 0, 1_000_000)?;
                SizeDist::BoundedPareto {
                    alpha,
                    min,
                    max,
                    grid,
                }
            }
            "choice" => {
                let Some(Value::Array(a)) = q.raw("values") else {
                    return Err(q.err("values", "required: a list of sizes"));
                };
                let mut v = Vec::new();
                for (i, x) in a.iter().enumerate() {
                    let b = match x {
                        Value::Int(i) if *i > 0 => *i as u64,
                        Value::Str(s) => sojourn_core::units::parse_bytes(s)
                            .map_err(|m| ConfError::new(format!("{path}.values[{i}]"), m))?,
                        _ => {
                            return Err(ConfError::new(
                                format!("{path}.values[{i}]"),
                                "expected a positive size",
                            ))
                        }
                    };
                    v.push(b.max(1));
                }
                if v.is_empty() {
                    return Err(q.err("values", "empty list"));
                }
                SizeDist::Choice(v)
            }
            _ => {
                let file = q
                    .str_opt("file")?
                    .ok_or_else(|| q.err("file", "required"))?;
                let pts = load_cdf(&base_dir.join(file)).map_err(|m| q.err("file", m))?;
                SizeDist::Empirical(pts)
            }
        };
        q.finish()?;
        Ok(Some(d))
    }
}

/// The largest CDF file accepted (a CDF needs hundreds of lines, not millions).
pub const MAX_CDF_BYTES: u64 = 16 * 1024 * 1024;

/// Reads a CDF file: `bytes probability` per line, `#` comments.
pub fn load_cdf(path: &Path) -> Result<Vec<(f64, f64)>, String> {
    let text = crate::files::read_regular_text(path, "size distribution", MAX_CDF_BYTES)?;
    parse_cdf(&text, &path.display().to_string())
}

/// Parses the text of a CDF file (`name` labels messages); fuzzed without files.
pub fn parse_cdf(text: &str, name: &str) -> Result<Vec<(f64, f64)>, String> {
    let mut pts: Vec<(f64, f64)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let mut it = l.split_whitespace();
        let (Some(a), Some(b)) = (it.next(), it.next()) else {
            return Err(format!("{}:{}: expected `bytes probability`", name, i + 1));
        };
        let x: f64 = a
            .parse()
            .map_err(|_| format!("{}:{}: bad size {}", name, i + 1, crate::files::excerpt(a)))?;
        let p: f64 = b.parse().map_err(|_| {
            format!(
                "{}:{}: bad probability {}",
                name,
                i + 1,
                crate::files::excerpt(b)
            )
        })?;
        if !(0.0..=1.0).contains(&p) || x < 0.0 {
            return Err(format!(
                "{}:{}: probability must be in [0, 1], size ≥ 0",
                name,
                i + 1
            ));
        }
        if let Some(&(px, pp)) = pts.last() {
            if x < px || p < pp {
                return Err(format!(
                    "{}:{}: sizes and probabilities must not decrease",
                    name,
                    i + 1
                ));
            }
        }
        pts.push((x, p));
    }
    match pts.last() {
        None => Err(format!("{}: empty CDF", name)),
        Some(&(_, p)) if (p - 1.0).abs() > 1e-9 => {
            Err(format!("{}: the last probability must be 1", name))
        }
        _ => Ok(pts),
    }
}

/// A distribution of time intervals (thin-stream message gaps, think times).
#[derive(Clone, Debug, PartialEq)]
pub enum IntervalDist {
    Fixed(Duration),
    Uniform {
        min: Duration,
        max: Duration,
    },
    Exponential {
        mean: Duration,
    },
    /// Log-normal with this median and 99th percentile: a heavy-tailed latency such as an
    /// application's wake-up (σ = ln(p99/median)/z₀.₉₉, z₀.₉₉ = 2.3263).
    LogNormal {
        median: Duration,
        p99: Duration,
    },
}

/// The standard normal distribution's 99th percentile.
const Z_99: f64 = 2.326_347_874_040_841;

impl IntervalDist {
    pub fn draw(&self, rng: &mut Rng) -> Duration {
        match *self {
            IntervalDist::Fixed(d) => d,
            IntervalDist::Uniform { min, max } => {
                Duration::from_secs_f64(rng.uniform(min.as_secs_f64(), max.as_secs_f64()))
            }
            IntervalDist::Exponential { mean } => {
                Duration::from_secs_f64(rng.exp(mean.as_secs_f64()))
            }
            IntervalDist::LogNormal { median, p99 } => {
                // Box–Muller: one standard normal from two uniforms (the first kept off 0).
                let u1 = 1.0 - rng.f64();
                let u2 = rng.f64();
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                let sigma = (p99.as_secs_f64() / median.as_secs_f64()).ln() / Z_99;
                Duration::from_secs_f64(median.as_secs_f64() * (sigma * z).exp())
            }
        }
    }

    pub fn mean(&self) -> Duration {
        match *self {
            IntervalDist::Fixed(d) => d,
            IntervalDist::Uniform { min, max } => Duration((min.0 + max.0) / 2),
            IntervalDist::Exponential { mean } => mean,
            // e^(μ + σ²/2) with e^μ the median.
            IntervalDist::LogNormal { median, p99 } => {
                let sigma = (p99.as_secs_f64() / median.as_secs_f64()).ln() / Z_99;
                Duration::from_secs_f64(median.as_secs_f64() * (sigma * sigma / 2.0).exp())
            }
        }
    }

    /// Reads `key`: a duration (`plain` says how to read it: fixed or exponential mean)
    /// or a table `{ dist = "uniform", min, max }`, `{ dist = "exponential", mean }`,
    /// `{ dist = "fixed", value }`, `{ dist = "lognormal", median, p99 }`.
    pub fn parse(
        p: &mut Params,
        key: &str,
        exponential_plain: bool,
    ) -> ConfResult<Option<IntervalDist>> {
        let path = p.key_path(key);
        let d = match p.raw(key) {
            None => return Ok(None),
            Some(Value::Str(s)) => {
                let d =
                    sojourn_core::units::parse_duration(s).map_err(|m| ConfError::new(&path, m))?;
                if exponential_plain {
                    IntervalDist::Exponential { mean: d }
                } else {
                    IntervalDist::Fixed(d)
                }
            }
            Some(Value::Table(t)) => {
                let mut q = Params::new(path.clone(), t);
                let kind = q.choice(
                    "dist",
                    &["fixed", "uniform", "exponential", "lognormal"],
                    "fixed",
                )?;
                let req = |q: &mut Params, k: &str| -> ConfResult<Duration> {
                    q.duration_opt(k)?.ok_or_else(|| q.err(k, "required"))
                };
                let d = match kind {
                    "fixed" => IntervalDist::Fixed(req(&mut q, "value")?),
                    "uniform" => {
                        let min = req(&mut q, "min")?;
                        let max = req(&mut q, "max")?;
                        if max < min {
                            return Err(q.err("max", "must not be below `min`"));
                        }
                        IntervalDist::Uniform { min, max }
                    }
                    "lognormal" => {
                        let median = req(&mut q, "median")?;
                        let p99 = req(&mut q, "p99")?;
                        if median.is_zero() {
                            return Err(q.err("median", "must be positive"));
                        }
                        if p99 < median {
                            return Err(q.err("p99", "must not be below `median`"));
                        }
                        IntervalDist::LogNormal { median, p99 }
                    }
                    _ => IntervalDist::Exponential {
                        mean: req(&mut q, "mean")?,
                    },
                };
                q.finish()?;
                d
            }
            Some(v) => {
                return Err(ConfError::new(
                    path,
                    format!(
                        "expected a duration or a distribution table, got {}",
                        v.type_name()
                    ),
                ))
            }
        };
        if d.mean().is_zero() {
            return Err(ConfError::new(path, "the mean interval must be positive"));
        }
        Ok(Some(d))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lognormal_interval_has_the_median_and_p99_it_was_given() {
        // median 136 µs, p99 6.9 ms (a reader's wake-up at normal priority on this
        // machine, issue 40 §4): σ = ln(6.9/0.136)/2.3263 = 1.6871; the mean is
        // 136 µs·e^(σ²/2) = 136·4.1505 = 564.5 µs.
        let d = IntervalDist::LogNormal {
            median: Duration::from_us(136),
            p99: Duration::from_us(6900),
        };
        assert!(
            (d.mean().as_secs_f64() * 1e6 - 564.5).abs() < 1.0,
            "{:?}",
            d.mean()
        );
        let mut rng = Rng::from_seed(7);
        let mut v: Vec<f64> = (0..200_000)
            .map(|_| d.draw(&mut rng).as_secs_f64() * 1e6)
            .collect();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let median = v[v.len() / 2];
        let p99 = v[v.len() * 99 / 100];
        assert!((median - 136.0).abs() < 3.0, "median {median}");
        assert!((p99 - 6900.0).abs() < 350.0, "p99 {p99}");
    }

    use super::*;

    #[test]
    fn bounded_pareto_mean_and_bounds() {
        let d = SizeDist::BoundedPareto {
            alpha: 1.2,
            min: 300.0 * 1024.0,
            max: 1024.0 * 1024.0 * 1024.0,
            grid: 0,
        };
        let mut r = Rng::from_seed(3);
        let n = 400_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let x = d.draw(&mut r) as f64;
            assert!(x >= 300.0 * 1024.0 - 1.0 && x <= 1024.0f64.powi(3) + 1.0);
            sum += x;
        }
        // Heavy tail: the sample mean converges slowly; 10% is a loose but real check.
        let m = sum / n as f64;
        assert!((m - d.mean()).abs() / d.mean() < 0.1, "{m} vs {}", d.mean());
    }

    #[test]
    fn pareto_median_matches_cdf() {
        // F(x) = 1/2 → x = L / (1 − (1 − (L/H)^α)/2)^(1/α).
        let (a, l, h) = (1.1f64, 1000.0f64, 1e6f64);
        let d = SizeDist::BoundedPareto {
            alpha: a,
            min: l,
            max: h,
            grid: 0,
        };
        let med = l / (1.0 - 0.5 * (1.0 - (l / h).powf(a))).powf(1.0 / a);
        let mut r = Rng::from_seed(9);
        let below = (0..100_000)
            .filter(|_| (d.draw(&mut r) as f64) < med)
            .count();
        assert!((below as f64 / 1e5 - 0.5).abs() < 0.01);
    }

    #[test]
    fn exponential_and_choice() {
        let mut r = Rng::from_seed(1);
        let e = SizeDist::Exponential { mean: 50_000.0 };
        let m: f64 = (0..100_000).map(|_| e.draw(&mut r) as f64).sum::<f64>() / 1e5;
        assert!((m - 50_000.0).abs() < 1000.0);
        let c = SizeDist::Choice(vec![15_000, 44_000, 73_000, 102_000]);
        for _ in 0..100 {
            assert!([15_000, 44_000, 73_000, 102_000].contains(&c.draw(&mut r)));
        }
    }

    /// The engine's sampler is the one Python reaches (`sojourn._engine.sample_sizes`);
    /// tests/python/test_model_crosscheck.py asserts the same three numbers for the same
    /// spec and seed, so both languages see the same samples.
    #[test]
    fn the_draws_python_sees() {
        let mut r = Rng::from_seed(1);
        let d = SizeDist::Exponential { mean: 30_000.0 };
        let v: Vec<u64> = (0..3).map(|_| d.draw(&mut r)).collect();
        assert_eq!(v, [50_078, 41_243, 3_166]);
    }
}
