//! Per-direction I/O statistics, fio style.
//!
//! Latencies are kept twice: exactly (count, min, max, sum, sum of squares; so mean and
//! standard deviation are exact) and as HdrHistogram bucket counts (3 significant digits,
//! auto-resizing) for percentiles. Like fio, the standard deviation is the *sample*
//! standard deviation (divide by n-1; 0 for fewer than two samples).

use super::options::{Dir, PerDir};
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

/// Half the sub-buckets of a bucket, as a power of two, in HdrHistogram's layout for 3
/// significant digits: 2048 sub-buckets resolve 1 part in 2000.
const SUB_BUCKET_HALF_MAGNITUDE: u32 = 10;
const SUB_BUCKET_HALF_COUNT: usize = 1 << SUB_BUCKET_HALF_MAGNITUDE;
const SUB_BUCKET_MASK: u64 = (1 << (SUB_BUCKET_HALF_MAGNITUDE + 1)) - 1;

/// Latency counts laid out exactly as [`Histogram`] lays out its counts for
/// `Histogram::new(3)` (lowest discernible value 1, 3 significant digits).
///
/// Recording is the hot path of a run (two histograms per I/O): here it is an index
/// computation and an increment, where `Histogram::record` also checks ranges, tracks min, max
/// and total, and may resize. The `Histogram` is built from these counts when a report asks
/// for it ([`HdrCounts::to_histogram`]); since every bucket's count is the same, so is
/// everything the histogram reports (percentiles, `iter_recorded`, min, max, equality).
#[derive(Debug, Clone, Default)]
struct HdrCounts {
    /// Indexed like the histogram's counts; grows to the highest index recorded.
    counts: Vec<u64>,
}

impl HdrCounts {
    /// HdrHistogram's `index_for` with unit magnitude 0 and 2048 sub-buckets.
    #[inline]
    fn index_of(v: u64) -> usize {
        // Bucket b holds values of magnitude 2^(b+10) ..; bucket 0 holds 0..2048.
        let bucket = 63 - SUB_BUCKET_HALF_MAGNITUDE - (v | SUB_BUCKET_MASK).leading_zeros();
        let sub_bucket = (v >> bucket) as usize;
        ((bucket as usize + 1) << SUB_BUCKET_HALF_MAGNITUDE) + sub_bucket - SUB_BUCKET_HALF_COUNT
    }

    /// The lowest value counted at `index` (the inverse of [`HdrCounts::index_of`]).
    fn value_at(index: usize) -> u64 {
        let bucket = (index >> SUB_BUCKET_HALF_MAGNITUDE) as i64 - 1;
        let mut sub_bucket = (index & (SUB_BUCKET_HALF_COUNT - 1)) + SUB_BUCKET_HALF_COUNT;
        let bucket = if bucket < 0 {
            sub_bucket -= SUB_BUCKET_HALF_COUNT;
            0
        } else {
            bucket as u32
        };
        (sub_bucket as u64) << bucket
    }

    #[inline]
    fn record(&mut self, v: u64) {
        let i = Self::index_of(v);
        match self.counts.get_mut(i) {
            Some(c) => *c += 1,
            None => {
                self.counts.resize(i + 1, 0);
                self.counts[i] = 1;
            }
        }
    }

    fn merge(&mut self, o: &HdrCounts) {
        if self.counts.len() < o.counts.len() {
            self.counts.resize(o.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
    }

    /// Counts without trailing empty buckets.
    fn used(&self) -> &[u64] {
        let n = self
            .counts
            .iter()
            .rposition(|&c| c > 0)
            .map_or(0, |i| i + 1);
        &self.counts[..n]
    }

    /// The histogram these counts describe, given the largest value recorded (it stands for
    /// its bucket, so that the histogram's own maximum is exact, as with direct recording).
    fn to_histogram(&self, max: u64) -> Histogram<u64> {
        let mut h = new_histogram();
        let used = self.used();
        for (i, &c) in used.iter().enumerate() {
            if c > 0 {
                let v = if i + 1 == used.len() {
                    max
                } else {
                    Self::value_at(i)
                };
                debug_assert_eq!(Self::index_of(v), i);
                // Auto-resizing covers every u64; clamp like `LatStat` always did regardless.
                if h.record_n(v, c).is_err() {
                    h.saturating_record_n(v, c);
                }
            }
        }
        h
    }
}

impl PartialEq for HdrCounts {
    fn eq(&self, other: &Self) -> bool {
        self.used() == other.used()
    }
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
    #[inline]
    pub fn record(&mut self, v: u64) {
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.n += 1;
        // At most 2^64 samples below 2^64 each: the sum cannot overflow (so no saturation).
        self.sum += v as u128;
        self.sum_sq = self.sum_sq.saturating_add((v as u128) * (v as u128));
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
#[derive(Debug, Clone, PartialEq)]
pub struct LatStat {
    exact: SampleStat,
    hist: Option<HdrCounts>,
}

impl Default for LatStat {
    fn default() -> Self {
        Self::new()
    }
}

impl LatStat {
    pub fn new() -> Self {
        LatStat {
            exact: SampleStat::new(),
            hist: Some(HdrCounts::default()),
        }
    }
    /// Exact moments only: `percentile` falls back to the mean.
    pub fn moments_only() -> Self {
        LatStat {
            exact: SampleStat::new(),
            hist: None,
        }
    }
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.exact.record(ns);
        if let Some(h) = self.hist.as_mut() {
            h.record(ns);
        }
    }
    pub fn merge(&mut self, o: &LatStat) {
        self.exact.merge(&o.exact);
        if let (Some(h), Some(oh)) = (self.hist.as_mut(), o.hist.as_ref()) {
            h.merge(oh);
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
        self.percentiles_of(&[p])[0]
    }
    /// `(percentile, value)` for fio's default list.
    pub fn fio_percentiles(&self) -> Vec<(f64, u64)> {
        FIO_PERCENTILES
            .iter()
            .copied()
            .zip(self.percentiles_of(&FIO_PERCENTILES))
            .collect()
    }
    /// [`LatStat::percentile`] of each of `ps`, building the histogram once.
    fn percentiles_of(&self, ps: &[f64]) -> Vec<u64> {
        if self.count() == 0 {
            return vec![0; ps.len()];
        }
        let hist = self.histogram();
        ps.iter()
            .map(|&p| match &hist {
                Some(h) => h
                    .value_at_quantile((p / 100.0).clamp(0.0, 1.0))
                    .clamp(self.min(), self.max()),
                None => self.mean().round() as u64,
            })
            .collect()
    }
    /// The latency histogram (built on each call: for reports, not for loops).
    pub fn histogram(&self) -> Option<Histogram<u64>> {
        self.hist.as_ref().map(|h| h.to_histogram(self.max()))
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
    #[inline]
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
/// with the average over the whole interval (KiB/s, rounded down). An interval without
/// completions has no log row and no bw/iops sample, as in fio (`__add_samples` skips a
/// direction that moved no bytes in the interval).
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
    #[inline]
    pub fn record(&mut self, t_ns: u64, bytes: u64) {
        // Most completions fall in the interval being filled: check its bounds before dividing.
        if let Some((i, b, n)) = &mut self.current
            && t_ns >= *i * self.interval_ns
            && t_ns - *i * self.interval_ns < self.interval_ns
        {
            *b = b.saturating_add(bytes);
            *n += 1;
            return;
        }
        self.flush();
        self.current = Some((t_ns / self.interval_ns, bytes, 1));
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
    /// Add the complete intervals up to `end_ns` that had completions as bw (KiB/s) and IOPS
    /// samples.
    pub fn feed_samples(&self, dir: &mut DirStats, end_ns: u64) {
        let count = self.complete(end_ns);
        for (_, v) in self.rows_with(count, |(b, _)| self.kib_per_s(b)) {
            dir.bw_samples.record(v);
        }
        for (_, v) in self.rows_with(count, |(_, i)| self.per_s(i)) {
            dir.iops_samples.record(v);
        }
    }
}

impl PerDir<DirStats> {
    /// I/Os completed in every direction.
    pub fn ios(&self) -> u64 {
        Dir::ALL.iter().map(|&d| self[d].ios()).sum()
    }
}

/// Which latency a [`LatLog`] row gives: fio's `_slat`, `_clat` and `_lat` logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatKind {
    Slat,
    Clat,
    Lat,
}

impl LatKind {
    pub const ALL: [LatKind; 3] = [LatKind::Slat, LatKind::Clat, LatKind::Lat];

    /// The log's file-name part (`name_slat.x.log`).
    pub fn suffix(self) -> &'static str {
        match self {
            LatKind::Slat => "slat",
            LatKind::Clat => "clat",
            LatKind::Lat => "lat",
        }
    }
}

/// `write_lat_log`'s latencies per interval of `log_avg_msec` (0 is 1 ms, as [`BwLog`]): the
/// mean submission, completion and total latency, in ns, of the I/Os that completed in each
/// interval, as fio's windowed latency logs give them. Intervals without completions have no
/// row.
#[derive(Debug, Clone, PartialEq)]
pub struct LatLog {
    interval_ms: u64,
    interval_ns: u64,
    /// Per interval index: (slat sum, clat sum, I/Os).
    buckets: std::collections::BTreeMap<u64, (u128, u128, u64)>,
}

impl LatLog {
    pub fn new(log_avg_msec: u64) -> Self {
        LatLog {
            interval_ms: log_avg_msec.max(1),
            interval_ns: log_avg_msec.max(1).saturating_mul(1_000_000),
            buckets: Default::default(),
        }
    }
    /// An I/O that completed at `t_ns` since the job (measurement) start.
    pub fn record(&mut self, t_ns: u64, slat_ns: u64, clat_ns: u64) {
        let e = self
            .buckets
            .entry(t_ns / self.interval_ns)
            .or_insert((0, 0, 0));
        e.0 += slat_ns as u128;
        e.1 += clat_ns as u128;
        e.2 += 1;
    }
    /// `(time_ms, mean ns)` of `kind` for each interval with completions, reported at the
    /// interval's end.
    pub fn rows(&self, kind: LatKind) -> Vec<(u64, u64)> {
        self.buckets
            .iter()
            .map(|(&i, &(slat, clat, n))| {
                let sum = match kind {
                    LatKind::Slat => slat,
                    LatKind::Clat => clat,
                    LatKind::Lat => slat + clat,
                };
                let mean = (sum / n as u128).min(u64::MAX as u128) as u64;
                (self.interval_ms.saturating_mul(i + 1), mean)
            })
            .collect()
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
    fn counts_build_the_histogram_direct_recording_builds() {
        let mut values: Vec<u64> = (0..5000).collect();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for shift in 0..64 {
            for _ in 0..50 {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                values.push(x >> shift);
            }
        }
        values.extend([u64::MAX, u64::MAX - 1, 1 << 63, (1 << 63) - 1]);
        let mut direct = new_histogram();
        let mut counts = HdrCounts::default();
        for &v in &values {
            direct.record(v).unwrap();
            counts.record(v);
            assert_eq!(
                HdrCounts::value_at(HdrCounts::index_of(v)),
                direct.lowest_equivalent(v)
            );
        }
        let built = counts.to_histogram(*values.iter().max().unwrap());
        assert_eq!(built.len(), direct.len());
        assert_eq!(built.max(), direct.max());
        assert_eq!(built.min_nz(), direct.min_nz());
        assert_eq!(built.distinct_values(), direct.distinct_values());
        assert!(built == direct, "histograms differ");
        for q in [0.0, 0.01, 0.5, 0.9, 0.999, 1.0] {
            assert_eq!(built.value_at_quantile(q), direct.value_at_quantile(q));
        }
        let a: Vec<_> = built
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect();
        let b: Vec<_> = direct
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect();
        assert_eq!(a, b);
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
        let mut d = DirStats::new();
        log.feed_samples(&mut d, 2_999_999_999); // third interval incomplete
        // The idle second interval is no sample (fio skips it), so it does not pull the mean.
        assert_eq!(d.bw_samples.count(), 1);
        assert_eq!(d.bw_samples.min(), 1024);
        assert_eq!(d.iops_samples.mean(), 1.0);
        assert!(BwLog::new(0).rows().is_empty());
    }

    #[test]
    fn lat_log_rows_are_interval_means() {
        let mut log = LatLog::new(1000);
        log.record(100_000_000, 1_000, 9_000);
        log.record(900_000_000, 3_000, 11_000);
        log.record(2_500_000_000, 500, 500);
        assert_eq!(log.rows(LatKind::Slat), vec![(1000, 2_000), (3000, 500)]);
        assert_eq!(log.rows(LatKind::Clat), vec![(1000, 10_000), (3000, 500)]);
        assert_eq!(log.rows(LatKind::Lat), vec![(1000, 12_000), (3000, 1_000)]);
    }
}
