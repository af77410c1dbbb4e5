//! The real ZN540 measurements of the characterization paper's artifact
//! (`../shared/data/zn540-measurements`, see its README.md) and their comparison with a
//! [`ZbenchReport`](super::ZbenchReport).
//!
//! Files hold a few header lines printed by the benchmark, then `label,latency_ns` (the
//! interference resets add `,index`). Only lines of that shape are read. Which file feeds which
//! case:
//!
//! * `partial_reset/run4` (`reset_<lbas>`), `partial_finish/run2` (`finish_<lbas>`,
//!   `reset_finished_<lbas>`), `open_close/run2`: the complete, larger runs the README's means
//!   come from (`partial_reset/run3` measured `reset_0` without the explicit open and is left
//!   out);
//! * `explicit_versus_implicit_io/run2_*`: labels as printed;
//! * `inteference/<io>_reset_inteference_{resets,<io>s}`: renamed to `reset_interference_<io>`
//!   and `<io>_interference`. Zero latencies there are slots the benchmark never filled (it
//!   prints a fixed-size array) and are dropped.
//!
//! Values the data lacks come from the paper's text (seed 001 §III-E, §III-G): the mean open
//! latency and the p95 of resets without concurrent I/O.

use super::{LatStats, ZbenchReport};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// (file under the data folder, label in the file or `*` for all, case name or `*` for the label)
const SOURCES: &[(&str, &str, &str)] = &[
    ("partial_reset/run4", "*", "*"),
    ("partial_finish/run2", "*", "*"),
    ("open_close/run2", "*", "*"),
    ("explicit_versus_implicit_io/run2_write_explicit", "*", "*"),
    ("explicit_versus_implicit_io/run2_write_implicit", "*", "*"),
    (
        "explicit_versus_implicit_io/run2_write_implicitly_opened",
        "*",
        "*",
    ),
    ("explicit_versus_implicit_io/run2_append_explicit", "*", "*"),
    ("explicit_versus_implicit_io/run2_append_implicit", "*", "*"),
    (
        "explicit_versus_implicit_io/run2_append_implicitly_opened",
        "*",
        "*",
    ),
    (
        "inteference/read_reset_inteference_resets",
        "reset_inteference",
        "reset_interference_read",
    ),
    (
        "inteference/read_reset_inteference_reads",
        "read_inteference",
        "read_interference",
    ),
    (
        "inteference/write_reset_inteference_resets",
        "reset_inteference",
        "reset_interference_write",
    ),
    (
        "inteference/write_reset_inteference_writes",
        "write_inteference",
        "write_interference",
    ),
    (
        "inteference/append_reset_inteference_resets",
        "reset_inteference",
        "reset_interference_append",
    ),
    (
        "inteference/append_reset_inteference_appends",
        "append_inteference",
        "append_interference",
    ),
];

/// Values stated in the paper's text only: (case, statistic, nanoseconds, where).
pub const PAPER_VALUES: &[(&str, Stat, f64, &str)] = &[
    ("open", Stat::Mean, 9_560.0, "seed 001 §III-E obs. 9"),
    (
        "reset_no_interference",
        Stat::P95,
        17_940_000.0,
        "seed 001 §III-G obs. 13",
    ),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stat {
    Mean,
    P50,
    P95,
}

/// One real distribution.
#[derive(Clone, Debug, Serialize)]
pub struct RealCase {
    pub source: String,
    pub samples: Vec<u64>,
}

/// Real distributions by ZoneLab case name.
#[derive(Clone, Debug, Default)]
pub struct Measurements {
    pub cases: BTreeMap<String, RealCase>,
}

/// `label,latency_ns[,...]` lines of a file; other lines (headers, progress) are skipped.
pub fn parse(text: &str) -> Vec<(&str, u64)> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.trim().split(',');
            let label = f.next()?;
            let ns = f.next()?.trim().parse::<u64>().ok()?;
            let ok = !label.is_empty()
                && label
                    .bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_');
            ok.then_some((label, ns))
        })
        .collect()
}

impl Measurements {
    /// Loads the data folder. Missing files are skipped; none found is an error.
    pub fn load(dir: &Path) -> Result<Measurements, String> {
        let mut m = Measurements::default();
        for &(file, label, case) in SOURCES {
            let path = dir.join(file);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let drop_zeros = file.starts_with("inteference/");
            for (l, ns) in parse(&text) {
                if (label != "*" && l != label) || (drop_zeros && ns == 0) {
                    continue;
                }
                let name = if case == "*" { l } else { case };
                m.cases
                    .entry(name.to_string())
                    .or_insert_with(|| RealCase {
                        source: file.to_string(),
                        samples: Vec::new(),
                    })
                    .samples
                    .push(ns);
            }
        }
        if m.cases.is_empty() {
            return Err(format!(
                "no measurement files found in {} (expected e.g. partial_reset/run4; see the data README)",
                dir.display()
            ));
        }
        Ok(m)
    }
}

/// Summary of a reference distribution (some values may be missing for paper-only cases).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RefStats {
    pub count: Option<u64>,
    pub mean_ns: Option<f64>,
    pub p50_ns: Option<f64>,
    pub p95_ns: Option<f64>,
}

/// Relative errors (ZoneLab − real) / real.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RelErr {
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p95: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ComparisonRow {
    pub case: String,
    pub source: String,
    pub real: RefStats,
    pub zonelab: RefStats,
    pub rel_err: RelErr,
}

fn rel(z: Option<f64>, r: Option<f64>) -> Option<f64> {
    match (z, r) {
        (Some(z), Some(r)) if r != 0.0 => Some((z - r) / r),
        _ => None,
    }
}

fn ref_of(s: &LatStats) -> RefStats {
    RefStats {
        count: Some(s.count),
        mean_ns: Some(s.mean_ns),
        p50_ns: Some(s.p50_ns as f64),
        p95_ns: Some(s.p95_ns as f64),
    }
}

/// One row per ZoneLab case that has a real (data or paper) counterpart, in report order.
pub fn compare(report: &ZbenchReport, real: &Measurements) -> Vec<ComparisonRow> {
    let mut rows = Vec::new();
    for c in &report.cases {
        let (source, r) = if let Some(rc) = real.cases.get(&c.name) {
            let Some(st) = LatStats::from_samples(&rc.samples) else {
                continue;
            };
            (format!("data {}", rc.source), ref_of(&st))
        } else if let Some(&(_, stat, v, at)) = PAPER_VALUES.iter().find(|p| p.0 == c.name) {
            let mut r = RefStats {
                count: None,
                mean_ns: None,
                p50_ns: None,
                p95_ns: None,
            };
            match stat {
                Stat::Mean => r.mean_ns = Some(v),
                Stat::P50 => r.p50_ns = Some(v),
                Stat::P95 => r.p95_ns = Some(v),
            }
            (format!("paper {at}"), r)
        } else {
            continue;
        };
        let z = ref_of(&c.stats);
        rows.push(ComparisonRow {
            case: c.name.clone(),
            source,
            rel_err: RelErr {
                mean: rel(z.mean_ns, r.mean_ns),
                p50: rel(z.p50_ns, r.p50_ns),
                p95: rel(z.p95_ns, r.p95_ns),
            },
            real: r,
            zonelab: z,
        });
    }
    rows
}

/// Nanoseconds in a readable unit.
pub fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} us", ns / 1e3)
    }
}

/// The comparison as a text table.
pub fn table(rows: &[ComparisonRow]) -> String {
    let o = |v: Option<f64>| v.map(fmt_ns).unwrap_or_else(|| "-".into());
    let e = |v: Option<f64>| {
        v.map(|x| format!("{:+.1}%", x * 100.0))
            .unwrap_or_else(|| "-".into())
    };
    let mut s = format!(
        "{:<26} {:>11} {:>11} {:>8} {:>11} {:>11} {:>8} {:>11} {:>11} {:>8}  source\n",
        "case",
        "real mean",
        "zl mean",
        "err",
        "real p50",
        "zl p50",
        "err",
        "real p95",
        "zl p95",
        "err"
    );
    for r in rows {
        s.push_str(&format!(
            "{:<26} {:>11} {:>11} {:>8} {:>11} {:>11} {:>8} {:>11} {:>11} {:>8}  {}\n",
            r.case,
            o(r.real.mean_ns),
            o(r.zonelab.mean_ns),
            e(r.rel_err.mean),
            o(r.real.p50_ns),
            o(r.zonelab.p50_ns),
            e(r.rel_err.p50),
            o(r.real.p95_ns),
            o(r.zonelab.p95_ns),
            e(r.rel_err.p95),
            r.source
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_skips_headers_and_keeps_label_latency_lines() {
        let t = "attaching, traddr=0000:88:00.0 ns = 2\nlba_size: 4096 zone_size: 524288\nReset device\nfilled zone\nreset_17232,5162130\nreset_inteference,15360542,0\nclose,10690\n";
        assert_eq!(
            parse(t),
            vec![
                ("reset_17232", 5_162_130),
                ("reset_inteference", 15_360_542),
                ("close", 10_690)
            ]
        );
    }
}
