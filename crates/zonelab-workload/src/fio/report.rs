//! fio-style reports: `--output-format=json` and the normal (human) format.
//!
//! Output is a pure function of the inputs (no wall clock, no pids), so equal runs render
//! byte-identical reports. JSON objects are written in fio's key order without relying on
//! serde_json's `preserve_order` feature.

use super::options::{Dir, PerDir};
use super::stats::{DirStats, LatStat};
use super::units::{NumUnit, num2str};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use std::collections::BTreeMap;

/// Default value for `"fio version"`.
pub const FIO_VERSION: &str = concat!("zonelab-", env!("CARGO_PKG_VERSION"));

/// Fixed `"time"` value (reports carry no wall-clock time).
pub const FIXED_TIME: &str = "Thu Jan  1 00:00:00 1970";

/// Report-wide values.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportHeader {
    /// `"fio version"`.
    pub fio_version: String,
    /// `"global options"`, in order (see `options::Parsed::global_options`).
    pub global_options: Vec<(String, String)>,
}

impl Default for ReportHeader {
    fn default() -> Self {
        ReportHeader {
            fio_version: FIO_VERSION.to_string(),
            global_options: Vec::new(),
        }
    }
}

/// Results of one job (or of a group of jobs merged for `group_reporting`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobReport {
    pub name: String,
    pub groupid: u32,
    /// Number of job clones merged into this report.
    pub jobs: u32,
    pub error: i32,
    pub description: Option<String>,
    pub stats: PerDir<DirStats>,
    /// Measured run time (after ramp), ns.
    pub runtime_ns: u64,
    /// Total job time including ramp, ns (`"elapsed"`, in whole seconds in JSON).
    pub elapsed_ns: u64,
    /// Echoed as `"job options"`.
    pub job_options: Vec<(String, String)>,
    /// Zone resets issued (zonemode=zbd); printed in the normal format like fio does.
    pub zone_resets: Option<u64>,
}

impl JobReport {
    pub fn new(name: &str, groupid: u32) -> Self {
        JobReport {
            name: name.to_string(),
            groupid,
            jobs: 1,
            ..Default::default()
        }
    }

    /// Merge another job (clone) into this one, as fio's group_reporting does: stats are
    /// pooled, run times take the maximum, `jobs` adds up.
    pub fn merge(&mut self, other: &JobReport) {
        self.jobs += other.jobs;
        if self.error == 0 {
            self.error = other.error;
        }
        for dir in Dir::ALL {
            self.stats[dir].merge(&other.stats[dir]);
        }
        self.runtime_ns = self.runtime_ns.max(other.runtime_ns);
        self.elapsed_ns = self.elapsed_ns.max(other.elapsed_ns);
        if let Some(z) = other.zone_resets {
            self.zone_resets = Some(self.zone_resets.unwrap_or(0) + z);
        }
    }
}

// ---------------------------------------------------------------------------
// Derived numbers shared by both formats.

fn div_round(a: u128, b: u128) -> u64 {
    a.saturating_add(b / 2)
        .checked_div(b)
        .map_or(0, |q| q.min(u64::MAX as u128) as u64)
}

fn ns_to_ms(ns: u64) -> u64 {
    div_round(ns as u128, 1_000_000)
}

/// Bytes per second over `runtime_ns`.
fn bw_bytes(bytes: u64, runtime_ns: u64) -> u64 {
    if runtime_ns == 0 {
        0
    } else {
        ((bytes as u128 * 1_000_000_000) / runtime_ns as u128).min(u64::MAX as u128) as u64
    }
}

fn iops(ios: u64, runtime_ns: u64) -> f64 {
    if runtime_ns == 0 {
        0.0
    } else {
        ios as f64 * 1e9 / runtime_ns as f64
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct GroupDir {
    bytes: u64,
    min_run_ns: u64,
    max_run_ns: u64,
    min_bw: u64,
    max_bw: u64,
    jobs: u32,
}

impl GroupDir {
    fn add(&mut self, d: &DirStats, runtime_ns: u64) {
        if d.ios() == 0 {
            return;
        }
        let bw = bw_bytes(d.bytes(), runtime_ns);
        if self.jobs == 0 {
            self.min_run_ns = runtime_ns;
            self.min_bw = bw;
        }
        self.bytes = self.bytes.saturating_add(d.bytes());
        self.min_run_ns = self.min_run_ns.min(runtime_ns);
        self.max_run_ns = self.max_run_ns.max(runtime_ns);
        self.min_bw = self.min_bw.min(bw);
        self.max_bw = self.max_bw.max(bw);
        self.jobs += 1;
    }
    /// Aggregate bandwidth, bytes/s (all bytes over the longest run).
    fn agg(&self) -> u64 {
        bw_bytes(self.bytes, self.max_run_ns)
    }
}

/// Per stonewall group, its directions' totals (indexed by [`Dir`]).
fn groups(jobs: &[JobReport]) -> BTreeMap<u32, PerDir<GroupDir>> {
    let mut g: BTreeMap<u32, PerDir<GroupDir>> = BTreeMap::new();
    for j in jobs {
        let e = g.entry(j.groupid).or_default();
        for dir in Dir::ALL {
            e[dir].add(&j.stats[dir], j.runtime_ns);
        }
    }
    g
}

/// Percentage of the group's aggregate bandwidth (KiB/s) that `mean_kib` represents.
fn pct_of_agg(mean_kib: f64, group: &GroupDir) -> f64 {
    let agg_kib = group.agg() as f64 / 1024.0;
    if agg_kib <= 0.0 {
        0.0
    } else {
        (mean_kib * 100.0 / agg_kib).min(100.0)
    }
}

const LAT_BOUNDS: [u64; 10] = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000];
const LAT_MS_KEYS: [&str; 12] = [
    "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000",
];

/// fio's latency distribution (percent of I/Os per bucket) for ns, us and ms ranges,
/// from the total-latency histograms of every direction.
fn latency_buckets(j: &JobReport) -> ([f64; 10], [f64; 10], [f64; 12]) {
    let mut ns = [0u64; 10];
    let mut us = [0u64; 10];
    let mut ms = [0u64; 12];
    let mut total = 0u64;
    for d in Dir::ALL.map(|dir| &j.stats[dir]) {
        let hist = d.lat.histogram();
        for it in hist.iter().flat_map(|h| h.iter_recorded()) {
            let v = it.value_iterated_to();
            let c = it.count_at_value();
            total += c;
            let idx = |x: u64| LAT_BOUNDS.iter().position(|&b| x < b);
            if v < 1000 {
                ns[idx(v).unwrap_or(9)] += c;
            } else if v < 1_000_000 {
                us[idx(v / 1000).unwrap_or(9)] += c;
            } else {
                let m = v / 1_000_000;
                let i = idx(m).unwrap_or(if m < 2000 { 10 } else { 11 });
                ms[i] += c;
            }
        }
    }
    let pct = |c: u64| {
        if total == 0 {
            0.0
        } else {
            c as f64 * 100.0 / total as f64
        }
    };
    (ns.map(pct), us.map(pct), ms.map(pct))
}

// ---------------------------------------------------------------------------
// JSON

/// An ordered JSON tree (objects keep insertion order when serialized).
enum J {
    Obj(Vec<(String, J)>),
    Arr(Vec<J>),
    Str(String),
    U(u64),
    I(i64),
    F(f64),
    Val(serde_json::Value),
}

impl Serialize for J {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            J::Obj(kv) => {
                let mut m = s.serialize_map(Some(kv.len()))?;
                for (k, v) in kv {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
            J::Arr(v) => {
                let mut q = s.serialize_seq(Some(v.len()))?;
                for x in v {
                    q.serialize_element(x)?;
                }
                q.end()
            }
            J::Str(x) => s.serialize_str(x),
            J::U(x) => s.serialize_u64(*x),
            J::I(x) => s.serialize_i64(*x),
            // Non-finite values never occur by construction; write 0 rather than null.
            J::F(x) => s.serialize_f64(if x.is_finite() { *x } else { 0.0 }),
            J::Val(v) => v.serialize(s),
        }
    }
}

struct Obj(Vec<(String, J)>);

impl Obj {
    fn new() -> Self {
        Obj(Vec::new())
    }
    fn put(mut self, k: &str, v: J) -> Self {
        self.0.push((k.to_string(), v));
        self
    }
    fn done(self) -> J {
        J::Obj(self.0)
    }
}

fn options_obj(opts: &[(String, String)]) -> J {
    J::Obj(
        opts.iter()
            .map(|(k, v)| (k.clone(), J::Str(v.clone())))
            .collect(),
    )
}

/// `"1.000000"`-style key, as fio prints percentiles.
fn pct_key(p: f64) -> String {
    format!("{p:.6}")
}

fn lat_json(l: &LatStat, with_percentiles: bool) -> J {
    let mut o = Obj::new()
        .put("min", J::U(l.min()))
        .put("max", J::U(l.max()))
        .put("mean", J::F(l.mean()))
        .put("stddev", J::F(l.stddev()))
        .put("N", J::U(l.count()));
    if with_percentiles && l.count() > 0 {
        let p = l
            .fio_percentiles()
            .into_iter()
            .map(|(p, v)| (pct_key(p), J::U(v)))
            .collect();
        o = o.put("percentile", J::Obj(p));
    }
    o.done()
}

fn dir_json(d: &DirStats, runtime_ns: u64, group: &GroupDir) -> J {
    let active = d.ios() > 0;
    let run_ns = if active { runtime_ns } else { 0 };
    let bwb = bw_bytes(d.bytes(), run_ns);
    let bw = &d.bw_samples;
    let io = &d.iops_samples;
    Obj::new()
        .put("io_bytes", J::U(d.bytes()))
        .put("io_kbytes", J::U(d.bytes() / 1024))
        .put("bw_bytes", J::U(bwb))
        .put("bw", J::U(bwb / 1024))
        .put("iops", J::F(iops(d.ios(), run_ns)))
        .put("runtime", J::U(ns_to_ms(run_ns)))
        .put("total_ios", J::U(d.ios()))
        .put("short_ios", J::U(d.short_ios))
        .put("drop_ios", J::U(d.drop_ios))
        .put("slat_ns", lat_json(&d.slat, false))
        .put("clat_ns", lat_json(&d.clat, true))
        .put("lat_ns", lat_json(&d.lat, true))
        .put("bw_min", J::U(bw.min()))
        .put("bw_max", J::U(bw.max()))
        .put("bw_agg", J::F(pct_of_agg(bw.mean(), group)))
        .put("bw_mean", J::F(bw.mean()))
        .put("bw_dev", J::F(bw.stddev()))
        .put("bw_samples", J::U(bw.count()))
        .put("iops_min", J::U(io.min()))
        .put("iops_max", J::U(io.max()))
        .put("iops_mean", J::F(io.mean()))
        .put("iops_stddev", J::F(io.stddev()))
        .put("iops_samples", J::U(io.count()))
        .done()
}

fn job_json(j: &JobReport, g: &PerDir<GroupDir>) -> J {
    let (ns, us, ms) = latency_buckets(j);
    let bucket_obj = |vals: &[f64], keys: &[&str]| {
        J::Obj(
            keys.iter()
                .zip(vals)
                .map(|(k, v)| (k.to_string(), J::F(*v)))
                .collect(),
        )
    };
    let keys10: Vec<String> = LAT_BOUNDS.iter().map(|b| b.to_string()).collect();
    let keys10: Vec<&str> = keys10.iter().map(String::as_str).collect();
    let mut o = Obj::new()
        .put("jobname", J::Str(j.name.clone()))
        .put("groupid", J::U(j.groupid as u64))
        .put("error", J::I(j.error as i64))
        .put("eta", J::U(0))
        .put(
            "elapsed",
            J::U(div_round(j.elapsed_ns as u128, 1_000_000_000)),
        );
    if let Some(d) = &j.description {
        o = o.put("desc", J::Str(d.clone()));
    }
    o.put("job options", options_obj(&j.job_options))
        .put("read", dir_json(&j.stats.read, j.runtime_ns, &g.read))
        .put("write", dir_json(&j.stats.write, j.runtime_ns, &g.write))
        .put("trim", dir_json(&j.stats.trim, j.runtime_ns, &g.trim))
        .put(
            "sync",
            Obj::new()
                .put("total_ios", J::U(0))
                .put("lat_ns", lat_json(&LatStat::new(), false))
                .done(),
        )
        .put("job_runtime", J::U(ns_to_ms(j.runtime_ns)))
        .put("latency_ns", bucket_obj(&ns, &keys10))
        .put("latency_us", bucket_obj(&us, &keys10))
        .put("latency_ms", bucket_obj(&ms, &LAT_MS_KEYS))
        .done()
}

/// Render fio's JSON output. `extra` is added as a top-level `extra_key` section (e.g.
/// "zonelab") after "jobs"; an empty `extra_key` omits it.
pub fn render_json(
    header: &ReportHeader,
    jobs: &[JobReport],
    extra_key: &str,
    extra: serde_json::Value,
) -> String {
    let g = groups(jobs);
    let empty = PerDir::<GroupDir>::default();
    let mut top = Obj::new()
        .put("fio version", J::Str(header.fio_version.clone()))
        .put("timestamp", J::U(0))
        .put("timestamp_ms", J::U(0))
        .put("time", J::Str(FIXED_TIME.to_string()))
        .put("global options", options_obj(&header.global_options))
        .put(
            "jobs",
            J::Arr(
                jobs.iter()
                    .map(|j| job_json(j, g.get(&j.groupid).unwrap_or(&empty)))
                    .collect(),
            ),
        );
    if !extra_key.is_empty() {
        top = top.put(extra_key, J::Val(extra));
    }
    let mut s = serde_json::to_string_pretty(&top.done()).unwrap_or_else(|_| "{}".to_string());
    s.push('\n');
    s
}

// ---------------------------------------------------------------------------
// Normal format

/// Unit for displaying nanosecond values whose largest value is `max` and smallest `min`:
/// the coarsest of nsec/usec/msec that keeps `max` within five digits without rounding
/// `min` to zero.
fn time_unit(min: u64, max: u64) -> (u64, &'static str) {
    if max > 99_999_999 && min >= 1_000_000 {
        (1_000_000, "msec")
    } else if max > 99_999 && min >= 1_000 {
        (1_000, "usec")
    } else {
        (1, "nsec")
    }
}

fn lat_line(out: &mut String, label: &str, l: &LatStat) {
    if l.count() == 0 {
        return;
    }
    let (div, unit) = time_unit(l.min(), l.max());
    let f = div as f64;
    out.push_str(&format!(
        "    {label} ({unit}): min={}, max={}, avg={:5.2}, stdev={:5.2}\n",
        num2str(l.min() / div, 6, NumUnit::Count),
        num2str(l.max() / div, 6, NumUnit::Count),
        l.mean() / f,
        l.stddev() / f,
    ));
}

fn percentile_block(out: &mut String, label: &str, l: &LatStat) {
    if l.count() == 0 {
        return;
    }
    let ps = l.fio_percentiles();
    let lo = ps.first().map_or(0, |p| p.1);
    let hi = ps.last().map_or(0, |p| p.1);
    let (div, unit) = time_unit(lo, hi);
    out.push_str(&format!("    {label} percentiles ({unit}):\n"));
    for (i, (p, v)) in ps.iter().enumerate() {
        if i % 4 == 0 {
            out.push_str("     |");
        }
        out.push_str(&format!(" {p:5.2}th=[{:5}]", v / div));
        let last = i + 1 == ps.len();
        if !last {
            out.push(',');
        }
        if last || i % 4 == 3 {
            out.push('\n');
        }
    }
}

fn bw_str(bytes_per_s: u64) -> (String, String) {
    (
        format!("{}/s", num2str(bytes_per_s, 4, NumUnit::BytesBin)),
        format!("{}/s", num2str(bytes_per_s, 4, NumUnit::BytesDec)),
    )
}

fn dir_block(out: &mut String, name: &str, j: &JobReport, d: &DirStats, g: &GroupDir) {
    if d.ios() == 0 {
        return;
    }
    let bw = bw_bytes(d.bytes(), j.runtime_ns);
    let (bin, dec) = bw_str(bw);
    let resets = match j.zone_resets {
        Some(z) => format!("; {z} zone resets"),
        None => String::new(),
    };
    out.push_str(&format!(
        "  {name}: IOPS={}, BW={bin} ({dec})({}/{}msec){resets}\n",
        num2str(
            iops(d.ios(), j.runtime_ns).round() as u64,
            4,
            NumUnit::Count
        ),
        num2str(d.bytes(), 4, NumUnit::BytesBin),
        ns_to_ms(j.runtime_ns),
    ));
    lat_line(out, "slat", &d.slat);
    lat_line(out, "clat", &d.clat);
    lat_line(out, " lat", &d.lat);
    percentile_block(out, "clat", &d.clat);
    let s = &d.bw_samples;
    if s.count() > 0 {
        out.push_str(&format!(
            "   bw (  KiB/s): min={:5}, max={:5}, per={:3.2}%, avg={:5.2}, stdev={:5.2}, samples={}\n",
            s.min(),
            s.max(),
            pct_of_agg(s.mean(), g),
            s.mean(),
            s.stddev(),
            s.count()
        ));
    }
    let s = &d.iops_samples;
    if s.count() > 0 {
        out.push_str(&format!(
            "   iops        : min={:5}, max={:5}, avg={:5.2}, stdev={:5.2}, samples={}\n",
            s.min(),
            s.max(),
            s.mean(),
            s.stddev(),
            s.count()
        ));
    }
}

fn latency_lines(out: &mut String, j: &JobReport) {
    let (ns, us, ms) = latency_buckets(j);
    let labels10: Vec<String> = LAT_BOUNDS.iter().map(|b| b.to_string()).collect();
    let mut emit = |unit: &str, vals: &[f64], labels: &[&str]| {
        let entries: Vec<String> = vals
            .iter()
            .zip(labels)
            .filter(|(v, _)| **v > 0.0)
            .map(|(v, l)| format!("{l}={:.2}%", v.max(0.01)))
            .collect();
        for chunk in entries.chunks(5) {
            out.push_str(&format!("  lat ({unit})   : {}\n", chunk.join(", ")));
        }
    };
    let l10: Vec<&str> = labels10.iter().map(String::as_str).collect();
    emit("nsec", &ns, &l10);
    emit("usec", &us, &l10);
    emit("msec", &ms, &LAT_MS_KEYS);
}

/// Render fio's normal (human) output. `extra_summary` (e.g. ZoneLab's device summary) is
/// appended after the run status groups when not empty.
pub fn render_normal(jobs: &[JobReport], extra_summary: &str) -> String {
    let g = groups(jobs);
    let empty = PerDir::<GroupDir>::default();
    let mut out = String::new();
    for j in jobs {
        let gd = g.get(&j.groupid).unwrap_or(&empty);
        out.push_str(&format!(
            "{}: (groupid={}, jobs={}): err={:2}: pid=0\n",
            j.name, j.groupid, j.jobs, j.error
        ));
        if let Some(d) = &j.description {
            out.push_str(&format!("  Description  : [{d}]\n"));
        }
        for dir in Dir::ALL {
            dir_block(&mut out, dir.name(), j, &j.stats[dir], &gd[dir]);
        }
        latency_lines(&mut out, j);
    }
    for (gid, dirs) in &g {
        out.push_str(&format!("\nRun status group {gid} (all jobs):\n"));
        for (label, dir) in ["   READ", "  WRITE", "   TRIM"].into_iter().zip(Dir::ALL) {
            let d = &dirs[dir];
            if d.jobs == 0 {
                continue;
            }
            let (agg, agg10) = bw_str(d.agg());
            let (min, min10) = bw_str(d.min_bw);
            let (max, max10) = bw_str(d.max_bw);
            out.push_str(&format!(
                "{label}: bw={agg} ({agg10}), {min}-{max} ({min10}-{max10}), io={} ({}), run={}-{}msec\n",
                num2str(d.bytes, 4, NumUnit::BytesBin),
                num2str(d.bytes, 4, NumUnit::BytesDec),
                ns_to_ms(d.min_run_ns),
                ns_to_ms(d.max_run_ns),
            ));
        }
    }
    if !extra_summary.is_empty() {
        out.push('\n');
        out.push_str(extra_summary);
        if !extra_summary.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::stats::BwLog;
    use super::*;

    fn sample_job() -> JobReport {
        let mut j = JobReport::new("seqwrite", 0);
        j.runtime_ns = 10_001_000_000;
        j.elapsed_ns = 10_001_000_000;
        j.job_options = vec![("rw".into(), "write".into()), ("bs".into(), "4k".into())];
        let mut log = BwLog::new(500);
        for i in 0..10_000u64 {
            let clat = 10_000 + (i % 100) * 100;
            j.stats.write.record(4096, 1_000 + i % 50, clat);
            log.record(i * 1_000_000, 4096);
        }
        log.feed_samples(&mut j.stats.write, j.runtime_ns);
        j
    }

    fn header() -> ReportHeader {
        ReportHeader {
            fio_version: "zonelab-test".into(),
            global_options: vec![("ioengine".into(), "spdk".into())],
        }
    }

    #[test]
    fn json_shape() {
        let s = render_json(
            &header(),
            &[sample_job()],
            "zonelab",
            serde_json::json!({"waf": 1.0}),
        );
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["fio version"], "zonelab-test");
        assert_eq!(v["timestamp"], 0);
        assert_eq!(v["time"], FIXED_TIME);
        assert_eq!(v["global options"]["ioengine"], "spdk");
        assert_eq!(v["zonelab"]["waf"], 1.0);
        let job = &v["jobs"][0];
        assert_eq!(job["jobname"], "seqwrite");
        assert_eq!(job["groupid"], 0);
        assert_eq!(job["error"], 0);
        assert_eq!(job["elapsed"], 10);
        assert_eq!(job["job_runtime"], 10001);
        assert_eq!(job["job options"]["bs"], "4k");
        let w = &job["write"];
        for k in [
            "io_bytes",
            "io_kbytes",
            "bw_bytes",
            "bw",
            "iops",
            "runtime",
            "total_ios",
            "short_ios",
            "drop_ios",
            "slat_ns",
            "clat_ns",
            "lat_ns",
            "bw_min",
            "bw_max",
            "bw_agg",
            "bw_mean",
            "bw_dev",
            "bw_samples",
            "iops_min",
            "iops_max",
            "iops_mean",
            "iops_stddev",
            "iops_samples",
        ] {
            assert!(w.get(k).is_some(), "missing write.{k}");
        }
        assert_eq!(w["io_bytes"], 40_960_000);
        assert_eq!(w["total_ios"], 10_000);
        assert_eq!(w["runtime"], 10001);
        assert_eq!(w["bw_bytes"], 4_095_590); // 40_960_000 B / 10.001 s
        assert_eq!(w["bw"], 3999);
        assert_eq!(w["bw_samples"], 20);
        assert_eq!(w["clat_ns"]["N"], 10_000);
        assert_eq!(w["clat_ns"]["min"], 10_000);
        assert_eq!(w["clat_ns"]["max"], 19_900);
        let pct = w["clat_ns"]["percentile"].as_object().unwrap();
        assert_eq!(pct.len(), 17);
        for k in [
            "1.000000",
            "50.000000",
            "99.900000",
            "99.950000",
            "99.990000",
        ] {
            assert!(pct.contains_key(k), "{k}");
        }
        assert!(w["lat_ns"]["percentile"]["99.000000"].is_u64());
        assert!(w["slat_ns"].get("percentile").is_none());
        assert_eq!(job["read"]["total_ios"], 0);
        assert_eq!(job["read"]["runtime"], 0);
        assert!(job["read"]["clat_ns"].get("percentile").is_none());
        assert_eq!(job["trim"]["io_bytes"], 0);
        assert_eq!(job["sync"]["total_ios"], 0);
        assert_eq!(job["latency_us"]["20"], 90.0);
        assert_eq!(job["latency_us"]["50"], 10.0);
        // Percentiles are written in fio's order, not sorted as strings.
        let i1 = s.find("\"5.000000\"").unwrap();
        let i2 = s.find("\"10.000000\"").unwrap();
        assert!(i1 < i2);
        let order: Vec<usize> = [
            "\"fio version\"",
            "\"global options\"",
            "\"jobs\"",
            "\"zonelab\"",
        ]
        .iter()
        .map(|k| s.find(k).unwrap())
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn deterministic() {
        let jobs = [sample_job(), JobReport::new("idle", 1)];
        let a = render_json(
            &header(),
            &jobs,
            "zonelab",
            serde_json::json!({"x": [1, 2]}),
        );
        let b = render_json(
            &header(),
            &jobs,
            "zonelab",
            serde_json::json!({"x": [1, 2]}),
        );
        assert_eq!(a, b);
        assert_eq!(render_normal(&jobs, "x"), render_normal(&jobs, "x"));
        assert!(!a.contains("NaN") && !a.contains("null"));
    }

    #[test]
    fn normal_looks_like_fio() {
        let mut j = sample_job();
        j.zone_resets = Some(3);
        let s = render_normal(&[j], "ZoneLab: waf=1.00");
        assert!(
            s.starts_with("seqwrite: (groupid=0, jobs=1): err= 0: pid=0\n"),
            "{s}"
        );
        assert!(
            s.contains(
                "  write: IOPS=1000, BW=4000KiB/s (4096kB/s)(39.1MiB/10001msec); 3 zone resets\n"
            ),
            "{s}"
        );
        assert!(
            s.contains("    slat (nsec): min=1000, max=1049, avg=1024.50"),
            "{s}"
        );
        assert!(
            s.contains("    clat (nsec): min=10000, max=19900, avg=14950.00"),
            "{s}"
        );
        assert!(s.contains("     lat (nsec):"), "{s}");
        assert!(
            s.contains("    clat percentiles (nsec):\n     |  1.00th=[10007],  5.00th=[10407],"),
            "{s}"
        );
        assert!(s.contains("     | 99.99th=[19900]\n"), "{s}");
        assert!(s.contains("   bw (  KiB/s): min= 4000, max= 4000, per=100.00%, avg=4000.00, stdev= 0.00, samples=20\n"), "{s}");
        assert!(
            s.contains("   iops        : min= 1000, max= 1000, avg=1000.00"),
            "{s}"
        );
        assert!(s.contains("  lat (usec)   : 20=90.00%, 50=10.00%\n"), "{s}");
        assert!(s.contains("\nRun status group 0 (all jobs):\n  WRITE: bw=4000KiB/s (4096kB/s), 4000KiB/s-4000KiB/s (4096kB/s-4096kB/s), io=39.1MiB (41.0MB), run=10001-10001msec\n"), "{s}");
        assert!(s.ends_with("\nZoneLab: waf=1.00\n"));
    }

    #[test]
    fn units_scale_with_magnitude() {
        let mut j = JobReport::new("slow", 0);
        j.runtime_ns = 1_000_000_000;
        for i in 0..100u64 {
            j.stats
                .read
                .record(1 << 20, 5_000, 2_000_000 + i * 2_000_000);
        }
        let s = render_normal(&[j], "");
        assert!(s.contains("    clat (msec): min=2, max=200,"), "{s}");
        assert!(s.contains("    slat (nsec): min=5000"), "{s}");
        assert!(s.contains("    clat percentiles (msec):"), "{s}");
        assert!(
            s.contains("  read: IOPS=100, BW=100MiB/s (105MB/s)(100MiB/1000msec)\n"),
            "{s}"
        );
        assert!(s.contains("   READ: bw=100MiB/s"), "{s}");
    }

    #[test]
    fn merge_reports() {
        let mut a = sample_job();
        let b = sample_job();
        a.merge(&b);
        assert_eq!(a.jobs, 2);
        assert_eq!(a.stats.write.ios(), 20_000);
        assert_eq!(a.stats.write.bw_samples.count(), 40);
    }
}
