//! Settings shared by the file-system workloads: run length, payload mode, seed, file-size
//! distributions, and the parsing of `key=value` parameters.

use serde::{Deserialize, Serialize};
use std::rc::Rc;
use zonelab_device::PayloadMode;
use zonelab_sim::{Nanos, SimRng};

/// Bytes per file-system block; in fingerprint mode every size and offset is a multiple.
pub const BLOCK: u64 = 4096;

/// How long the measured phase runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunLength {
    /// Simulated time from the start of the measured phase (after warm-up).
    Time(Nanos),
    /// Operations started by all threads together (as counted in the report).
    Ops(u64),
}

/// How a workload runs, whatever its kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// Root of every random choice and of the data written.
    pub seed: u64,
    /// What the file system stores per block; must match the file system's mode.
    pub payload: PayloadMode,
    /// Length of the measured phase. `None`: the workload's own end (one pass over the files
    /// for fio jobs, all files for mdtest); filebench personalities need a length.
    pub run: Option<RunLength>,
    /// Simulated time after the fileset is built during which operations run but are not
    /// counted (`[run] warmup` of an experiment).
    pub warmup: Nanos,
    /// Stop at the first read whose data differs from what was written (the run then fails
    /// with an error naming file, offset, expected and found data); otherwise count it in
    /// `verify.mismatches` and go on.
    pub stop_on_mismatch: bool,
    /// Called once, at the simulated instant the measured phase starts (after the fileset is
    /// built and the warm-up has passed), so a caller can snapshot device and file-system
    /// counters and report the measured window alone.
    #[serde(skip)]
    pub on_measure: Option<MeasureHook>,
    /// Ends the warm-up only once the system under test says it is warm (checked every
    /// [`WarmGate::POLL`] of simulated time after `warmup` has passed), e.g. once the file
    /// system has started cleaning: GC studies measure the steady state, not the first pass
    /// over free space.
    #[serde(skip)]
    pub warm_until: Option<WarmGate>,
}

/// A condition the warm-up waits for (see [`RunConfig::warm_until`]).
#[derive(Clone)]
pub struct WarmGate {
    /// Whether the system is warm now.
    pub ready: Rc<dyn Fn() -> bool>,
    /// Longest warm-up (simulated) before the run fails.
    pub limit: Nanos,
    /// What is waited for, for the error when `limit` passes ("the file system has cleaned
    /// 4 zones").
    pub what: String,
}

impl WarmGate {
    /// How often the condition is checked, in simulated time.
    pub const POLL: Nanos = Nanos::from_ms(10);
}

impl std::fmt::Debug for WarmGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WarmGate({}, limit {})", self.what, self.limit)
    }
}

impl PartialEq for WarmGate {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.ready, &other.ready)
    }
}

/// A callback run when a workload's measured phase starts (see [`RunConfig::on_measure`]).
#[derive(Clone)]
pub struct MeasureHook(pub Rc<dyn Fn()>);

impl std::fmt::Debug for MeasureHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MeasureHook")
    }
}

impl PartialEq for MeasureHook {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            seed: 1,
            payload: PayloadMode::Fingerprint,
            run: None,
            warmup: Nanos::ZERO,
            stop_on_mismatch: true,
            on_measure: None,
            warm_until: None,
        }
    }
}

/// Distribution of file sizes in a fileset.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SizeDist {
    /// Every file has this size.
    Fixed(u64),
    /// Gamma distributed with this mean and shape, as filebench draws fileset sizes (its
    /// `cvar-gamma` variables and the older `sizegamma` attribute, shape 1.5 by default).
    Gamma { mean: u64, shape: f64 },
}

impl SizeDist {
    /// filebench's default: gamma with shape 1.5.
    pub fn gamma(mean: u64) -> SizeDist {
        SizeDist::Gamma { mean, shape: 1.5 }
    }

    pub fn mean(&self) -> u64 {
        match *self {
            SizeDist::Fixed(n) => n,
            SizeDist::Gamma { mean, .. } => mean,
        }
    }

    /// One size in bytes (truncated to an integer as filebench does).
    pub fn sample(&self, rng: &mut SimRng) -> u64 {
        match *self {
            SizeDist::Fixed(n) => n,
            SizeDist::Gamma { mean, shape } => {
                (gamma_knuth(rng, shape, mean as f64 / shape) as u64).min(u64::MAX / 2)
            }
        }
    }
}

/// A gamma-distributed value with shape `a` and scale `b`, by Knuth's algorithms (TAOCP vol. 2,
/// §3.4.1: algorithm A for a > 1, Ahrens-Dieter's G for a <= 1), the method filebench uses
/// for fileset sizes and directory widths.
pub fn gamma_knuth(rng: &mut SimRng, a: f64, b: f64) -> f64 {
    assert!(a > 0.0, "gamma shape must be positive");
    if a <= 1.0 {
        let p = std::f64::consts::E / (a + std::f64::consts::E);
        loop {
            let u = rng.unit();
            let mut v = rng.unit();
            while v == 0.0 {
                v = rng.unit();
            }
            let (x, q) = if u < p {
                let x = v.powf(1.0 / a);
                (x, (-x).exp())
            } else {
                let x = 1.0 - v.ln();
                (x, x.powf(a - 1.0))
            };
            if rng.unit() < q {
                return b * x;
            }
        }
    }
    let s = (2.0 * a - 1.0).sqrt();
    loop {
        let y = (std::f64::consts::PI * rng.unit()).tan();
        let x = s * y + a - 1.0;
        if x <= 0.0 {
            continue;
        }
        let v = rng.unit();
        if v <= (1.0 + y * y) * ((a - 1.0) * (x / (a - 1.0)).ln() - s * y).exp() {
            return b * x;
        }
    }
}

/// Rounds `n` up to whole blocks (fingerprint payload mode moves whole blocks only).
pub fn round_up_blocks(n: u64) -> u64 {
    n.div_ceil(BLOCK) * BLOCK
}

/// A size in bytes: a number with an optional binary suffix, `k`/`kb`/`kib` = 1024, `m`,
/// `g`, `t` likewise (filebench's convention; `128k` and `128KiB` are both 131072).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(end);
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => {
            return Err(format!(
                "size '{s}': use a number with k, m, g or t (binary)"
            ));
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("size '{s}': not a number"))?;
    let bytes = v * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes >= u64::MAX as f64 {
        return Err(format!("size '{s}' is out of range"));
    }
    Ok(bytes as u64)
}

/// A simulated duration; a bare number is seconds (`10`, `1.5s`, `500ms`, `2m`).
pub fn parse_duration(s: &str) -> Result<Nanos, String> {
    crate::fio::units::parse_time_ns(s, 1_000_000_000)
        .map(Nanos)
        .ok_or_else(|| format!("duration '{s}': use a number with us, ms, s, m or h"))
}

/// The most simulated threads (connections, jobs) a file-system workload may run: the ceiling
/// `zonelab fio` puts on its job clones. Each keeps its state and statistics in memory, so a
/// larger count would exhaust memory before the run could say so.
pub const MAX_THREADS: u32 = crate::fio::run::MAX_JOBS as u32;

/// A count of simulated threads for `key`: 1 ..= [`MAX_THREADS`].
pub fn parse_threads(key: &str, s: &str) -> Result<u32, String> {
    const MAX_THREADS_U64: u64 = MAX_THREADS as u64;
    match parse_u64(s)? {
        n @ 1..=MAX_THREADS_U64 => Ok(n as u32),
        _ => Err(format!(
            "{key} = {s}: use 1 to {MAX_THREADS} simulated threads"
        )),
    }
}

pub fn parse_u64(s: &str) -> Result<u64, String> {
    s.trim()
        .replace('_', "")
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number"))
}

pub fn parse_f64(s: &str) -> Result<f64, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))
}

pub fn parse_bool(s: &str) -> Result<bool, String> {
    crate::fio::units::parse_bool(s).ok_or_else(|| format!("'{s}' is not a boolean"))
}

/// A share of capacity in (0, 1].
pub fn parse_share(s: &str) -> Result<f64, String> {
    let v = parse_f64(s)?;
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("utilization {v} must be in (0, 1]"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_binary() {
        assert_eq!(parse_bytes("128k"), Ok(131_072));
        assert_eq!(parse_bytes("128KiB"), Ok(131_072));
        assert_eq!(parse_bytes("1.5m"), Ok(1_572_864));
        assert_eq!(parse_bytes("16MiB"), Ok(16 << 20));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("12q").is_err());
        assert_eq!(parse_duration("10"), Ok(Nanos::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Nanos::from_ms(500)));
        assert_eq!(parse_u64("112_500"), Ok(112_500));
    }

    #[test]
    fn gamma_sizes_have_the_requested_mean() {
        for shape in [0.5, 1.5, 4.0] {
            let d = SizeDist::Gamma {
                mean: 128 << 10,
                shape,
            };
            let mut rng = SimRng::new(7);
            let n = 20_000;
            let sum: u64 = (0..n).map(|_| d.sample(&mut rng)).sum();
            let mean = sum as f64 / n as f64;
            let want = (128 << 10) as f64;
            assert!(
                (mean - want).abs() < 0.03 * want,
                "shape {shape}: mean {mean} vs {want}"
            );
        }
        assert_eq!(SizeDist::Fixed(5).sample(&mut SimRng::new(1)), 5);
    }
}
