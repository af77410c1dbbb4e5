//! Per-direction I/O statistics, fio style.
//!
//! Latencies are kept twice: exactly (count, min, max, sum, sum of squares; so mean and
//! standard deviation are exact) and in an HdrHistogram (3 significant digits,
//! auto-resizing) for percentiles. Like fio, the standard deviation is the *sample*
//! standard deviation (divide by n-1; 0 for fewer than two samples).

use hdrhistogram::Histogram;

/// fio's default percentile list.
pub const FIO_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

fn new_histogram() -> Histogram<u64> {
    // 3 significant digits, auto-resizing; cannot fail for sigfig=3.
    let mut h = Histogram::new(3).unwrap_or_else(|_| unreachable!("sigfig 3 is valid"));
    h.auto(true);
    h
}

fn mean_of(n: u64, sum: u128) -> f64 {
    if n == 0 { 0.0 } else { sum as f64 / n as f64 }
}

/// Sample standard deviation from exact sums.
fn stddev_of(n: u64, sum: u128, sum_sq: u128) -> f64 {
    if n < 2 {
        return 0.0;
    }
    let n128 = n as u128;
    // var = (n*Σx² - (Σx)²) / (n(n-1)), computed exactly when it fits in u128.
    let exact = n128
        .checked_mul(sum_sq)
        .zip(sum.checked_mul(sum))
        .map(|(a, b)| a.saturating_sub(b));
    let var = match exact {
        Some(num) => num as f64 / (n as f64 * (n as f64 - 1.0)),
        None => {
            let nf = n as f64;
            let mean = sum as f64 / nf;
            ((sum_sq as f64 - nf * mean * mean) / (nf - 1.0)).max(0.0)
        }
    };
    var.sqrt()
}

/// Exact summary of integer samples (min, max, mean, sample stddev).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleStat {
    n: u64,
    min: u64,
    max: u64,
    sum: u128,
    sum_sq: u128,
}

impl SampleStat {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn record(&mut self, v: u64) {
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.n += 1;
        self.sum = self.sum.saturating_add(v as u128);
        self.sum_sq = self.sum_sq.saturating_add((v as u128) * (v as u128));
    }
    /// Records `v` `k` times.
    pub fn record_repeated(&mut self, v: u64, k: u64) {
        if k == 0 {
            return;
        }
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.n += k;
        self.sum = self.sum.saturating_add(v as u128 * k as u128);
        self.sum_sq = self
            .sum_sq
            .saturating_add((v as u128) * (v as u128) * k as u128);
    }
    pub fn merge(&mut self, o: &SampleStat) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 || o.min < self.min {
            self.min = o.min;
        }
        self.max = self.max.max(o.max);
        self.n += o.n;
        self.sum = self.sum.saturating_add(o.sum);
        self.sum_sq = self.sum_sq.saturating_add(o.sum_sq);
    }
    pub fn count(&self) -> u64 {
        self.n
    }
    /// 0 when empty.
    pub fn min(&self) -> u64 {
        self.min
    }
    pub fn max(&self) -> u64 {
        self.max
    }
    pub fn sum(&self) -> u128 {
        self.sum
    }
    pub fn mean(&self) -> f64 {
        mean_of(self.n, self.sum)
    }
    pub fn stddev(&self) -> f64 {
        stddev_of(self.n, self.sum, self.sum_sq)
    }
}

/// A latency distribution in nanoseconds: exact moments plus a histogram (omitted for
/// distributions whose percentiles are never reported, such as fio's slat).
#[derive(Debug, Clone)]
pub struct LatStat {
    exact: SampleStat,
    hist: Option<Histogram<u64>>,
}

impl Default for LatStat {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for LatStat {
    fn eq(&self, other: &Self) -> bool {
        self.exact == other.exact && self.hist == other.hist
    }
}

impl LatStat {
    pub fn new() -> Self {
        LatStat {
            exact: SampleStat::new(),
            hist: Some(new_histogram()),
        }
    }
    /// Exact moments only: `percentile` falls back to the mean.
    pub fn moments_only() -> Self {
        LatStat {
            exact: SampleStat::new(),
            hist: None,
        }
    }
    pub fn record(&mut self, ns: u64) {
        self.exact.record(ns);
        // `record` auto-resizes; values beyond the largest trackable one are clamped.
        if let Some(h) = self.hist.as_mut()
            && h.record(ns).is_err()
        {
            h.saturating_record(ns);
        }
    }
    pub fn merge(&mut self, o: &LatStat) {
        self.exact.merge(&o.exact);
        // Auto-resizing histograms with equal precision always add.
        if let (Some(h), Some(oh)) = (self.hist.as_mut(), o.hist.as_ref()) {
            let _ = h.add(oh);
        }
    }
    pub fn count(&self) -> u64 {
        self.exact.count()
    }
    pub fn min(&self) -> u64 {
        self.exact.min()
    }
    pub fn max(&self) -> u64 {
        self.exact.max()
    }
    pub fn mean(&self) -> f64 {
        self.exact.mean()
    }
    pub fn stddev(&self) -> f64 {
        self.exact.stddev()
    }
    /// Value at percentile `p` (0..=100), clamped to the exact [min, max]; 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.count() == 0 {
            return 0;
        }
        let q = (p / 100.0).clamp(0.0, 1.0);
        match &self.hist {
            Some(h) => h.value_at_quantile(q).clamp(self.min(), self.max()),
            None => self.mean().round() as u64,
        }
    }
    /// `(percentile, value)` for fio's default list.
    pub fn fio_percentiles(&self) -> Vec<(f64, u64)> {
        FIO_PERCENTILES
            .iter()
            .map(|&p| (p, self.percentile(p)))
            .collect()
    }
    pub fn histogram(&self) -> Option<&Histogram<u64>> {
        self.hist.as_ref()
    }
}

/// Statistics for one I/O direction (read or write) of one job (or a merged group).
#[derive(Debug, Clone, PartialEq)]
pub struct DirStats {
    /// Submission latency (ns); fio reports no slat percentiles, so no histogram.
    pub slat: LatStat,
    /// Completion latency (ns).
    pub clat: LatStat,
    /// Total latency = slat + clat (ns).
    pub lat: LatStat,
    ios: u64,
    bytes: u64,
    pub short_ios: u64,
    pub drop_ios: u64,
    /// Per-interval bandwidth samples in KiB/s (fio's `bw_*` fields); see [`BwLog`].
    pub bw_samples: SampleStat,
    /// Per-interval IOPS samples (fio's `iops_*` fields).
    pub iops_samples: SampleStat,
}

impl Default for DirStats {
    fn default() -> Self {
        DirStats {
            slat: LatStat::moments_only(),
            clat: LatStat::new(),
            lat: LatStat::new(),
            ios: 0,
            bytes: 0,
            short_ios: 0,
            drop_ios: 0,
            bw_samples: SampleStat::default(),
            iops_samples: SampleStat::default(),
        }
    }
}

impl DirStats {
    pub fn new() -> Self {
        Self::default()
    }
    /// One completed I/O of `bytes` bytes.
    pub fn record(&mut self, bytes: u64, slat_ns: u64, clat_ns: u64) {
        self.ios += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        self.slat.record(slat_ns);
        self.clat.record(clat_ns);
        self.lat.record(slat_ns.saturating_add(clat_ns));
    }
    /// Fold `other` in (group_reporting, numjobs clones).
    pub fn merge(&mut self, other: &DirStats) {
        self.ios += other.ios;
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.short_ios += other.short_ios;
        self.drop_ios += other.drop_ios;
        self.slat.merge(&other.slat);
        self.clat.merge(&other.clat);
        self.lat.merge(&other.lat);
        self.bw_samples.merge(&other.bw_samples);
        self.iops_samples.merge(&other.iops_samples);
    }
    pub fn ios(&self) -> u64 {
        self.ios
    }
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// Bytes and I/Os completed per fixed interval, for fio's `write_bw_log`/`write_iops_log`
/// with `log_avg_msec`, and for the `bw_*`/`iops_*` interval statistics.
///
/// Interval `i` covers `[i*T, (i+1)*T)` of job time and is reported at time `(i+1)*T` ms
/// with the average over the whole interval (KiB/s, rounded down). Intervals without
/// completions have no log row but count as zero samples for the bw/iops statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct BwLog {
    interval_ms: u64,
    interval_ns: u64,
    /// The interval being filled (completions arrive nearly in time order): index, bytes, ios.
    current: Option<(u64, u64, u64)>,
    /// (bytes, ios) per interval index, sparse.
    buckets: std::collections::BTreeMap<u64, (u64, u64)>,
}

impl BwLog {
    /// `log_avg_msec`; 0 is treated as 1 ms (per-I/O logging is not modelled).
    pub fn new(log_avg_msec: u64) -> Self {
        BwLog {
            interval_ms: log_avg_msec.max(1),
            interval_ns: log_avg_msec.max(1).saturating_mul(1_000_000),
            current: None,
            buckets: Default::default(),
        }
    }
    pub fn interval_ms(&self) -> u64 {
        self.interval_ms
    }
    /// An I/O of `bytes` completed at `t_ns` since the job (measurement) start.
    pub fn record(&mut self, t_ns: u64, bytes: u64) {
        let idx = t_ns / self.interval_ns;
        match &mut self.current {
            Some((i, b, n)) if *i == idx => {
                *b = b.saturating_add(bytes);
                *n += 1;
            }
            _ => {
                self.flush();
                self.current = Some((idx, bytes, 1));
            }
        }
    }
    /// Moves the interval being filled into the sparse table.
    fn flush(&mut self) {
        if let Some((i, b, n)) = self.current.take() {
            let e = self.buckets.entry(i).or_insert((0, 0));
            e.0 = e.0.saturating_add(b);
            e.1 += n;
        }
    }
    /// All intervals recorded so far, the one being filled included.
    fn settled(&self) -> std::collections::BTreeMap<u64, (u64, u64)> {
        let mut m = self.buckets.clone();
        if let Some((i, b, n)) = self.current {
            let e = m.entry(i).or_insert((0, 0));
            e.0 = e.0.saturating_add(b);
            e.1 += n;
        }
        m
    }
    fn last_index(&self) -> Option<u64> {
        let last_stored = self.buckets.keys().next_back().copied();
        let current = self.current.map(|(i, _, _)| i);
        last_stored.max(current)
    }
    /// `(time_ms, f(bytes, ios))` for the intervals with completions among the first `count`.
    /// Idle intervals have no row (a log of a long, mostly idle run stays small).
    fn rows_with(&self, count: u64, f: impl Fn((u64, u64)) -> u64) -> Vec<(u64, u64)> {
        self.settled()
            .range(..count)
            .map(|(&i, &v)| (self.interval_ms.saturating_mul(i + 1), f(v)))
            .collect()
    }
    fn kib_per_s(&self, bytes: u64) -> u64 {
        ((bytes as u128 * 1000) / (self.interval_ms as u128 * 1024)) as u64
    }
    fn per_s(&self, ios: u64) -> u64 {
        ((ios as u128 * 1000) / self.interval_ms as u128) as u64
    }
    /// `(time_ms, KiB/s)` for every interval up to the last one with data.
    pub fn rows(&self) -> Vec<(u64, u64)> {
        let n = self.last_index().map_or(0, |i| i + 1);
        self.rows_with(n, |(b, _)| self.kib_per_s(b))
    }
    /// `(time_ms, IOPS)` for every interval up to the last one with data.
    pub fn iops_rows(&self) -> Vec<(u64, u64)> {
        let n = self.last_index().map_or(0, |i| i + 1);
        self.rows_with(n, |(_, i)| self.per_s(i))
    }
    /// Number of intervals that end at or before `end_ns`.
    fn complete(&self, end_ns: u64) -> u64 {
        end_ns / self.interval_ms.saturating_mul(1_000_000)
    }
    /// Add the complete intervals up to `end_ns` as bw (KiB/s) and IOPS samples.
    pub fn feed_samples(&self, dir: &mut DirStats, end_ns: u64) {
        let count = self.complete(end_ns);
        let busy = self.rows_with(count, |(b, _)| self.kib_per_s(b));
        for &(_, v) in &busy {
            dir.bw_samples.record(v);
        }
        for (_, v) in self.rows_with(count, |(_, i)| self.per_s(i)) {
            dir.iops_samples.record(v);
        }
        // Intervals without completions are samples of zero.
        let idle = count - busy.len() as u64;
        dir.bw_samples.record_repeated(0, idle);
        dir.iops_samples.record_repeated(0, idle);
    }
    fn format(rows: &[(u64, u64)], direction: u8, bs: u64) -> String {
        let mut s = String::new();
        for (t, v) in rows {
            s.push_str(&format!("{t}, {v}, {direction}, {bs}, 0\n"));
        }
        s
    }
    /// fio log text: `time_ms, KiB/s, direction (0 read, 1 write), bs, offset` per line.
    /// The offset column is 0 (averaged entries have no single offset).
    pub fn to_fio_log(&self, direction: u8, bs: u64) -> String {
        Self::format(&self.rows(), direction, bs)
    }
    /// Same, with IOPS values (for `write_iops_log`).
    pub fn to_fio_iops_log(&self, direction: u8, bs: u64) -> String {
        Self::format(&self.iops_rows(), direction, bs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_mean_stddev_percentiles() {
        let mut d = DirStats::new();
        for v in 1..=100u64 {
            d.record(4096, 10, v * 1000);
        }
        assert_eq!(d.ios(), 100);
        assert_eq!(d.bytes(), 409_600);
        assert_eq!(d.clat.min(), 1000);
        assert_eq!(d.clat.max(), 100_000);
        assert_eq!(d.clat.mean(), 50_500.0);
        // sample stddev of 1..=100 is sqrt(841.666...) = 29.011491975882016
        assert!((d.clat.stddev() - 29_011.491_975_882_016).abs() < 1e-6);
        assert_eq!(d.lat.mean(), 50_510.0);
        assert_eq!(d.slat.stddev(), 0.0);
        assert_eq!(d.slat.mean(), 10.0);
        // 3 significant digits: bucket values within 0.1%.
        let p50 = d.clat.percentile(50.0);
        assert!((50_000..=50_050).contains(&p50), "{p50}");
        let p99 = d.clat.percentile(99.0);
        assert!((99_000..=99_100).contains(&p99), "{p99}");
        assert_eq!(d.clat.percentile(100.0), 100_000);
        assert_eq!(d.clat.fio_percentiles().len(), 17);
    }

    #[test]
    fn small_exact_percentiles() {
        let mut s = LatStat::new();
        for v in 1..=10u64 {
            s.record(v);
        }
        assert_eq!(s.percentile(50.0), 5);
        assert_eq!(s.percentile(90.0), 9);
        assert_eq!(s.percentile(99.99), 10);
        assert_eq!(LatStat::new().percentile(50.0), 0);
    }

    #[test]
    fn stddev_edge_cases() {
        let mut s = SampleStat::new();
        assert_eq!((s.mean(), s.stddev()), (0.0, 0.0));
        s.record(7);
        assert_eq!((s.mean(), s.stddev(), s.min(), s.max()), (7.0, 0.0, 7, 7));
        s.record(9);
        assert!((s.stddev() - std::f64::consts::SQRT_2).abs() < 1e-12);
        let mut big = SampleStat::new();
        big.record(u64::MAX);
        big.record(0);
        assert!(big.stddev().is_finite());
    }

    #[test]
    fn merge_equals_single_recording() {
        let (mut a, mut b, mut all) = (DirStats::new(), DirStats::new(), DirStats::new());
        for v in 0..1000u64 {
            let (s, c) = (v % 7, 1000 + v * 13);
            if v % 3 == 0 { &mut a } else { &mut b }.record(512, s, c);
            all.record(512, s, c);
        }
        a.merge(&b);
        assert_eq!(a, all);
    }

    #[test]
    fn bw_log_rows() {
        let mut log = BwLog::new(1000);
        // 1 MiB in the first second, nothing in the second, 2 MiB in the third.
        log.record(100_000_000, 1 << 20);
        log.record(2_500_000_000, 1 << 20);
        log.record(2_900_000_000, 1 << 20);
        assert_eq!(log.rows(), vec![(1000, 1024), (3000, 2048)]);
        assert_eq!(log.iops_rows(), vec![(1000, 1), (3000, 2)]);
        assert_eq!(
            log.to_fio_log(1, 4096),
            "1000, 1024, 1, 4096, 0\n3000, 2048, 1, 4096, 0\n"
        );
        let mut d = DirStats::new();
        log.feed_samples(&mut d, 2_999_999_999); // third interval incomplete
        assert_eq!(d.bw_samples.count(), 2);
        assert_eq!(d.bw_samples.max(), 1024);
        assert_eq!(d.iops_samples.mean(), 0.5);
        assert!(BwLog::new(0).rows().is_empty());
    }
}
