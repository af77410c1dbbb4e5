//! fio-compatible job specification: command-line and job-file parsing.
//!
//! Scoping rules (a simplified version of fio's):
//! * Command line: options before the first `--name` are global. Each `--name=X` starts a
//!   new job that inherits the current globals; options after it apply to that job only.
//! * A bare argument is a job file. Its jobs start from the command-line globals given
//!   *before* it (options after it do not reach back). A `[global]` section inside a job
//!   file affects the jobs that follow it in that file only. After a job file, options
//!   before the next `--name` are global again (for jobs defined later).
//! * `profile`, `set`, `output-format` and `output` are command-line only.
//! * `kb_base` is applied before the other options of the same scope, so it may be written
//!   anywhere in a section.

use super::units::{edit_distance, parse_bool, parse_size, parse_time_ns, parse_u64};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// I/O pattern (`rw=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    Read,
    Write,
    RandRead,
    RandWrite,
    /// Sequential mixed reads and writes (`rw=rw` / `rw=readwrite`).
    ReadWrite,
    /// Random mixed reads and writes (`rw=randrw`).
    RandReadWrite,
    /// Sequential trims (`rw=trim`): under `zonemode=zbd`, fio resets a zone per trim.
    Trim,
    /// Random trims (`rw=randtrim`), of zones that hold data under `zonemode=zbd`.
    RandTrim,
}

impl Rw {
    pub fn is_random(self) -> bool {
        matches!(
            self,
            Rw::RandRead | Rw::RandWrite | Rw::RandReadWrite | Rw::RandTrim
        )
    }
    pub fn reads(self) -> bool {
        matches!(
            self,
            Rw::Read | Rw::RandRead | Rw::ReadWrite | Rw::RandReadWrite
        )
    }
    pub fn writes(self) -> bool {
        matches!(
            self,
            Rw::Write | Rw::RandWrite | Rw::ReadWrite | Rw::RandReadWrite
        )
    }
    pub fn trims(self) -> bool {
        matches!(self, Rw::Trim | Rw::RandTrim)
    }
    /// Whether the pattern issues I/O in direction `dir`.
    pub fn does(self, dir: Dir) -> bool {
        match dir {
            Dir::Read => self.reads(),
            Dir::Write => self.writes(),
            Dir::Trim => self.trims(),
        }
    }
    /// fio's spelling.
    pub fn as_fio_str(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::RandRead => "randread",
            Rw::RandWrite => "randwrite",
            Rw::ReadWrite => "rw",
            Rw::RandReadWrite => "randrw",
            Rw::Trim => "trim",
            Rw::RandTrim => "randtrim",
        }
    }
}

/// A direction of I/O, numbered as fio's `ddir` (the number in its bandwidth logs, and the
/// index of per-direction arrays); [`PerDir`] holds one value per direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Read = 0,
    Write = 1,
    Trim = 2,
}

impl Dir {
    pub const ALL: [Dir; 3] = [Dir::Read, Dir::Write, Dir::Trim];

    /// fio's name of the direction in reports ("read", "write", "trim").
    pub fn name(self) -> &'static str {
        match self {
            Dir::Read => "read",
            Dir::Write => "write",
            Dir::Trim => "trim",
        }
    }
}

/// A byte count, or a percentage of the device resolved by the runner.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Size {
    Bytes(u64),
    /// Percentage in (0, 100] (0 is allowed for offsets).
    Percent(f64),
}

impl Size {
    /// Bytes for a device of `device_bytes` bytes (percentages are rounded down).
    pub fn resolve(&self, device_bytes: u64) -> u64 {
        match *self {
            Size::Bytes(b) => b,
            Size::Percent(p) => {
                let v = (device_bytes as f64) * p / 100.0;
                if v.is_finite() && v > 0.0 {
                    (v as u64).min(device_bytes)
                } else {
                    0
                }
            }
        }
    }
}

/// A per-direction value (`bs=r,w,t`, `rate=r,w,t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PerDir<T> {
    pub read: T,
    pub write: T,
    pub trim: T,
}

impl<T: Copy> PerDir<T> {
    pub fn all(v: T) -> Self {
        PerDir::from_fn(|_| v)
    }
}

impl<T> PerDir<T> {
    /// The value of each direction from `f`.
    pub fn from_fn(mut f: impl FnMut(Dir) -> T) -> Self {
        PerDir {
            read: f(Dir::Read),
            write: f(Dir::Write),
            trim: f(Dir::Trim),
        }
    }
}

impl<T> std::ops::Index<Dir> for PerDir<T> {
    type Output = T;
    fn index(&self, dir: Dir) -> &T {
        match dir {
            Dir::Read => &self.read,
            Dir::Write => &self.write,
            Dir::Trim => &self.trim,
        }
    }
}

impl<T> std::ops::IndexMut<Dir> for PerDir<T> {
    fn index_mut(&mut self, dir: Dir) -> &mut T {
        match dir {
            Dir::Read => &mut self.read,
            Dir::Write => &mut self.write,
            Dir::Trim => &mut self.trim,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ZoneMode {
    None,
    Zbd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IoEngine {
    #[serde(rename = "spdk")]
    Spdk,
    #[serde(rename = "io_uring")]
    IoUring,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IoScheduler {
    #[serde(rename = "none")]
    None,
    #[serde(rename = "mq-deadline")]
    MqDeadline,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum OutputFormat {
    #[default]
    Normal,
    Json,
}

/// One fio job (before `numjobs` cloning; the runner clones it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    pub name: String,
    pub description: Option<String>,
    pub rw: Rw,
    /// Percentage of mixed I/O that is reads (0..=100). `rwmixwrite=W` sets it to 100-W.
    pub rwmixread: u8,
    /// Block size per direction, bytes; > 0 and a multiple of 512.
    pub bs: PerDir<u64>,
    pub iodepth: u32,
    pub numjobs: u32,
    /// `None`: the whole device (from `offset`).
    pub size: Option<Size>,
    pub offset: Size,
    /// Added to `offset` for each clone (`numjobs`) of this job.
    pub offset_increment: Size,
    pub group_reporting: bool,
    /// `io_size`/`io_limit`: bytes of I/O to issue (may exceed `size`, wrapping around).
    pub io_size: Option<Size>,
    /// `number_ios`; `None` (or 0 on input) means no limit.
    pub number_ios: Option<u64>,
    /// `runtime`; `None` (or 0 on input) means no time limit.
    pub runtime_ns: Option<u64>,
    pub time_based: bool,
    pub ramp_time_ns: u64,
    /// `rate`, bytes/s per direction.
    pub rate: PerDir<Option<u64>>,
    /// `rate_iops` per direction.
    pub rate_iops: PerDir<Option<u64>>,
    pub zonemode: ZoneMode,
    pub max_open_zones: Option<u32>,
    pub job_max_open_zones: Option<u32>,
    pub zonerange: Option<u64>,
    pub zonesize: Option<u64>,
    /// Accepted and stored, but the target is always the simulated device.
    pub filename: Option<String>,
    pub direct: bool,
    pub thread: bool,
    pub ioengine: IoEngine,
    pub ioscheduler: IoScheduler,
    pub zone_append: bool,
    /// `seed` / `randseed`; `None`: the runner's default.
    pub seed: Option<u64>,
    /// Log file prefixes. A bare flag (`--write_bw_log`) becomes the job name.
    pub write_bw_log: Option<String>,
    pub write_lat_log: Option<String>,
    pub write_iops_log: Option<String>,
    pub log_avg_msec: u64,
    /// `stonewall` / `wait_for_previous`.
    pub stonewall: bool,
    pub new_group: bool,
    /// 1024 (fio's default compatibility mode) or 1000.
    pub kb_base: u32,
    /// Options set explicitly for this job (not inherited), in input order, with fio's
    /// canonical names; echoed under "job options" in JSON output.
    pub job_options: Vec<(String, String)>,
}

impl Default for JobSpec {
    fn default() -> Self {
        JobSpec {
            name: String::new(),
            description: None,
            rw: Rw::Read,
            rwmixread: 50,
            bs: PerDir::all(4096),
            iodepth: 1,
            numjobs: 1,
            size: None,
            offset: Size::Bytes(0),
            offset_increment: Size::Bytes(0),
            group_reporting: false,
            io_size: None,
            number_ios: None,
            runtime_ns: None,
            time_based: false,
            ramp_time_ns: 0,
            rate: PerDir::all(None),
            rate_iops: PerDir::all(None),
            zonemode: ZoneMode::None,
            max_open_zones: None,
            job_max_open_zones: None,
            zonerange: None,
            zonesize: None,
            filename: None,
            direct: false,
            thread: false,
            ioengine: IoEngine::Spdk,
            ioscheduler: IoScheduler::None,
            zone_append: false,
            seed: None,
            write_bw_log: None,
            write_lat_log: None,
            write_iops_log: None,
            log_avg_msec: 0,
            stonewall: false,
            new_group: false,
            kb_base: 1024,
            job_options: Vec::new(),
        }
    }
}

/// Result of [`parse_cli`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parsed {
    pub jobs: Vec<JobSpec>,
    pub output_format: OutputFormat,
    /// `--output=FILE`.
    pub output: Option<String>,
    /// `--profile=NAME` (device profile).
    pub profile: Option<String>,
    /// `--set k=v` / `--set=k=v`, in order.
    pub sets: Vec<(String, String)>,
    /// Global options (command line and job-file `[global]` sections), for "global options".
    pub global_options: Vec<(String, String)>,
}

/// Result of [`parse_jobfile`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobFile {
    pub jobs: Vec<JobSpec>,
    /// Options from `[global]` sections, in order.
    pub global_options: Vec<(String, String)>,
}

/// A parse error. Every message names the option (or file/line) and what is accepted.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum OptionError {
    #[error("unknown option '{option}' ({location}){}", did_you_mean(.suggestion))]
    Unknown {
        option: String,
        location: String,
        suggestion: Option<String>,
    },
    #[error("option '{option}' ({location}): '{value}' {problem}")]
    BadValue {
        option: String,
        value: String,
        problem: String,
        location: String,
    },
    #[error("option '{option}' ({location}) needs a value: {hint}")]
    MissingValue {
        option: String,
        location: String,
        hint: String,
    },
    #[error("option '{option}' ({location}) is only accepted on the command line")]
    CommandLineOnly { option: String, location: String },
    #[error("{file}:{line}: {message}")]
    Syntax {
        file: String,
        line: usize,
        message: String,
    },
    #[error("cannot read job file '{path}': {message}")]
    Io { path: String, message: String },
    #[error("no jobs defined: give --name=NAME (with options) or a job file")]
    NoJobs,
    #[error("invalid argument '{arg}': {message}")]
    BadArgument { arg: String, message: String },
}

fn did_you_mean(s: &Option<String>) -> String {
    match s {
        Some(s) => format!("; did you mean '{s}'?"),
        None => String::new(),
    }
}

/// Option names accepted in jobs (canonical first, then aliases), for suggestions.
const JOB_OPTIONS: &[&str] = &[
    "name",
    "description",
    "rw",
    "readwrite",
    "rwmixread",
    "rwmixwrite",
    "bs",
    "blocksize",
    "iodepth",
    "numjobs",
    "size",
    "offset",
    "offset_increment",
    "group_reporting",
    "io_size",
    "io_limit",
    "number_ios",
    "runtime",
    "time_based",
    "ramp_time",
    "rate",
    "rate_iops",
    "zonemode",
    "max_open_zones",
    "job_max_open_zones",
    "zonerange",
    "zonesize",
    "filename",
    "direct",
    "thread",
    "ioengine",
    "ioscheduler",
    "zone_append",
    "seed",
    "randseed",
    "verify",
    "write_bw_log",
    "write_lat_log",
    "write_iops_log",
    "log_avg_msec",
    "stonewall",
    "wait_for_previous",
    "new_group",
    "kb_base",
];

const CLI_ONLY: &[&str] = &["profile", "set", "output-format", "output"];

fn suggest(key: &str) -> Option<String> {
    let mut best: Option<(usize, &str)> = None;
    for cand in JOB_OPTIONS.iter().chain(CLI_ONLY) {
        let d = edit_distance(key, cand);
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, cand));
        }
    }
    let (d, cand) = best?;
    let limit = (key.chars().count() / 3).clamp(1, 3);
    (d <= limit).then(|| cand.to_string())
}

/// One `key[=value]` as written, with where it came from.
#[derive(Debug, Clone)]
struct RawOpt {
    key: String,
    value: Option<String>,
    location: String,
}

const SIZE_EXAMPLES: &str = "is not a size (examples: 4k, 128KiB, 1m, 512)";

fn bad(opt: &RawOpt, key: &str, problem: impl Into<String>) -> OptionError {
    OptionError::BadValue {
        option: key.to_string(),
        value: opt.value.clone().unwrap_or_default(),
        problem: problem.into(),
        location: opt.location.clone(),
    }
}

fn size_of(opt: &RawOpt, key: &str, v: &str, kb_base: u32) -> Result<u64, OptionError> {
    parse_size(v, kb_base).ok_or_else(|| bad(opt, key, SIZE_EXAMPLES))
}

fn size_or_percent(
    opt: &RawOpt,
    key: &str,
    v: &str,
    kb_base: u32,
    allow_zero_pct: bool,
) -> Result<Size, OptionError> {
    if let Some(p) = v.trim().strip_suffix('%') {
        let pct: f64 = p
            .trim()
            .parse()
            .map_err(|_| bad(opt, key, "is not a percentage (example: 50%)"))?;
        let ok = pct.is_finite() && pct <= 100.0 && (pct > 0.0 || (allow_zero_pct && pct == 0.0));
        if !ok {
            let range = if allow_zero_pct {
                "0..=100"
            } else {
                "(0, 100]"
            };
            return Err(bad(opt, key, format!("percentage must be in {range}")));
        }
        return Ok(Size::Percent(pct));
    }
    parse_size(v, kb_base).map(Size::Bytes).ok_or_else(|| {
        bad(
            opt,
            key,
            "is not a size or percentage (examples: 4k, 1g, 512, 50%)",
        )
    })
}

fn int_of<T: TryFrom<u64>>(
    opt: &RawOpt,
    key: &str,
    v: &str,
    min: u64,
    max: u64,
) -> Result<T, OptionError> {
    let n =
        parse_u64(v).ok_or_else(|| bad(opt, key, format!("is not an integer in {min}..={max}")))?;
    if n < min || n > max {
        return Err(bad(
            opt,
            key,
            format!("is out of range (accepted: {min}..={max})"),
        ));
    }
    T::try_from(n).map_err(|_| {
        bad(
            opt,
            key,
            format!("is out of range (accepted: {min}..={max})"),
        )
    })
}

fn block_size(opt: &RawOpt, key: &str, v: &str, kb_base: u32) -> Result<u64, OptionError> {
    if v.contains(':') || (v.contains('-') && !v.starts_with('-')) {
        return Err(bad(
            opt,
            key,
            "uses a block size range, which is not supported (give a single size, or r,w)",
        ));
    }
    let n = size_of(opt, key, v, kb_base)?;
    if n == 0 || n % 512 != 0 {
        let mut msg = String::from("must be a positive multiple of 512 bytes");
        if v.to_ascii_lowercase().contains("ib") && kb_base != 1000 {
            msg.push_str(
                " (note: with fio's default kb_base=1024, KiB/MiB mean 1000/1000000; \
                 write 4k, or set kb_base=1000)",
            );
        }
        return Err(bad(opt, key, format!("= {n} bytes {msg}")));
    }
    Ok(n)
}

/// Parse `a[,b[,c]]` per-direction values (read, write, trim); empty parts keep the previous
/// value, and a single value sets all three, as in fio.
fn split_rw<T: Copy>(
    opt: &RawOpt,
    key: &str,
    v: &str,
    current: PerDir<T>,
    mut one: impl FnMut(&str) -> Result<T, OptionError>,
) -> Result<PerDir<T>, OptionError> {
    let parts: Vec<&str> = v.split(',').collect();
    if parts.len() > 3 {
        return Err(bad(
            opt,
            key,
            "has too many values (accepted: v, or read,write[,trim])",
        ));
    }
    if parts.len() == 1 {
        return Ok(PerDir::all(one(parts[0])?));
    }
    let mut out = current;
    for (dir, part) in Dir::ALL.into_iter().zip(parts) {
        if !part.trim().is_empty() {
            out[dir] = one(part)?;
        }
    }
    Ok(out)
}

fn is_flag_option(key: &str) -> bool {
    matches!(
        key,
        "group_reporting"
            | "time_based"
            | "direct"
            | "thread"
            | "zone_append"
            | "stonewall"
            | "wait_for_previous"
            | "new_group"
            | "write_bw_log"
            | "write_lat_log"
            | "write_iops_log"
    )
}

fn canonical(key: &str) -> &str {
    match key {
        "readwrite" => "rw",
        "blocksize" => "bs",
        "io_limit" => "io_size",
        "randseed" => "seed",
        "wait_for_previous" => "stonewall",
        other => other,
    }
}

/// Apply one option to `job`.
fn apply(job: &mut JobSpec, opt: &RawOpt) -> Result<(), OptionError> {
    let lower = opt.key.to_ascii_lowercase();
    let key: &str = &lower;
    if CLI_ONLY.contains(&key) {
        return Err(OptionError::CommandLineOnly {
            option: opt.key.clone(),
            location: opt.location.clone(),
        });
    }
    if !JOB_OPTIONS.contains(&key) {
        let message = match key {
            "include" => Some("'include' directives are not supported"),
            _ => None,
        };
        if let Some(m) = message {
            return Err(OptionError::BadArgument {
                arg: opt.key.clone(),
                message: m.to_string(),
            });
        }
        return Err(OptionError::Unknown {
            option: opt.key.clone(),
            location: opt.location.clone(),
            suggestion: suggest(key),
        });
    }
    let flag = is_flag_option(key);
    let value = match (&opt.value, flag) {
        (Some(v), _) => v.trim(),
        (None, true) => "",
        (None, false) => {
            return Err(OptionError::MissingValue {
                option: opt.key.clone(),
                location: opt.location.clone(),
                hint: format!("write {key}=VALUE"),
            });
        }
    };
    let kb = job.kb_base;
    let flag_value = |k: &str| -> Result<bool, OptionError> {
        if opt.value.is_none() {
            Ok(true)
        } else {
            parse_bool(value).ok_or_else(|| bad(opt, k, "is not a boolean (accepted: 0, 1)"))
        }
    };
    match canonical(key) {
        "name" => {
            if value.is_empty() {
                return Err(bad(opt, key, "is empty (a job needs a name)"));
            }
            job.name = value.to_string();
        }
        "description" => job.description = Some(value.to_string()),
        "rw" => {
            let (base, suffix) = match value.split_once(':') {
                Some((b, s)) => (b, Some(s)),
                None => (value, None),
            };
            if suffix.is_some() {
                return Err(bad(
                    opt,
                    key,
                    "uses the ':N' sequential-skip suffix, which is not supported",
                ));
            }
            job.rw = match base.to_ascii_lowercase().as_str() {
                "read" => Rw::Read,
                "write" => Rw::Write,
                "randread" => Rw::RandRead,
                "randwrite" => Rw::RandWrite,
                "rw" | "readwrite" => Rw::ReadWrite,
                "randrw" => Rw::RandReadWrite,
                "trim" => Rw::Trim,
                "randtrim" => Rw::RandTrim,
                "trimwrite" | "randtrimwrite" => {
                    return Err(bad(
                        opt,
                        key,
                        "is not supported (accepted: read, write, randread, randwrite, rw, readwrite, randrw, trim, randtrim); run a trim job and a write job instead",
                    ));
                }
                _ => {
                    return Err(bad(
                        opt,
                        key,
                        "is not an I/O pattern (accepted: read, write, randread, randwrite, rw, readwrite, randrw, trim, randtrim)",
                    ));
                }
            };
        }
        "rwmixread" => job.rwmixread = int_of(opt, key, value, 0, 100)?,
        "rwmixwrite" => {
            let w: u8 = int_of(opt, key, value, 0, 100)?;
            job.rwmixread = 100 - w;
        }
        "bs" => {
            job.bs = split_rw(opt, key, value, job.bs, |p| {
                block_size(opt, key, p.trim(), kb)
            })?;
        }
        "iodepth" => job.iodepth = int_of(opt, key, value, 1, 65_535)?,
        "numjobs" => job.numjobs = int_of(opt, key, value, 1, super::run::MAX_JOBS)?,
        "size" => job.size = Some(size_or_percent(opt, key, value, kb, false)?),
        "offset" => job.offset = size_or_percent(opt, key, value, kb, true)?,
        "offset_increment" => job.offset_increment = size_or_percent(opt, key, value, kb, true)?,
        "group_reporting" => job.group_reporting = flag_value(key)?,
        // fio reads io_size=0 as unset: the job does `size` of I/O.
        "io_size" => {
            job.io_size =
                Some(size_or_percent(opt, key, value, kb, false)?).filter(|s| *s != Size::Bytes(0))
        }
        "number_ios" => {
            let n: u64 = int_of(opt, key, value, 0, u64::MAX)?;
            job.number_ios = (n > 0).then_some(n);
        }
        "runtime" => {
            let t = parse_time_ns(value, 1_000_000_000)
                .ok_or_else(|| bad(opt, key, "is not a time (examples: 10, 10s, 500ms, 2m, 1h)"))?;
            job.runtime_ns = (t > 0).then_some(t);
        }
        "time_based" => job.time_based = flag_value(key)?,
        "ramp_time" => {
            job.ramp_time_ns = parse_time_ns(value, 1_000_000_000)
                .ok_or_else(|| bad(opt, key, "is not a time (examples: 10, 10s, 500ms, 2m, 1h)"))?;
        }
        "rate" => {
            job.rate = split_rw(opt, key, value, job.rate, |p| {
                let n = parse_size(p.trim(), kb).ok_or_else(|| {
                    bad(
                        opt,
                        key,
                        "is not a rate in bytes/s (examples: 100m, 500k, 100m,50m)",
                    )
                })?;
                Ok((n > 0).then_some(n))
            })?;
        }
        "rate_iops" => {
            job.rate_iops = split_rw(opt, key, value, job.rate_iops, |p| {
                let n = parse_size(p.trim(), kb).ok_or_else(|| {
                    bad(
                        opt,
                        key,
                        "is not an IOPS count (examples: 1000, 10k, 5000,2000)",
                    )
                })?;
                Ok((n > 0).then_some(n))
            })?;
        }
        "zonemode" => {
            job.zonemode = match value.to_ascii_lowercase().as_str() {
                "none" => ZoneMode::None,
                "zbd" => ZoneMode::Zbd,
                _ => return Err(bad(opt, key, "is not supported (accepted: none, zbd)")),
            }
        }
        "max_open_zones" => job.max_open_zones = Some(int_of(opt, key, value, 0, u32::MAX as u64)?),
        "job_max_open_zones" => {
            job.job_max_open_zones = Some(int_of(opt, key, value, 0, u32::MAX as u64)?)
        }
        "zonerange" => job.zonerange = Some(size_of(opt, key, value, kb)?),
        "zonesize" => job.zonesize = Some(size_of(opt, key, value, kb)?),
        "filename" => job.filename = Some(value.to_string()),
        "direct" => job.direct = flag_value(key)?,
        "thread" => job.thread = flag_value(key)?,
        "ioengine" => {
            job.ioengine = match value {
                "spdk" => IoEngine::Spdk,
                "io_uring" => IoEngine::IoUring,
                _ => {
                    return Err(bad(
                        opt,
                        key,
                        "is not a ZoneLab I/O engine (accepted: spdk, io_uring)",
                    ));
                }
            }
        }
        "ioscheduler" => {
            job.ioscheduler = match value {
                "none" => IoScheduler::None,
                "mq-deadline" => IoScheduler::MqDeadline,
                _ => {
                    return Err(bad(
                        opt,
                        key,
                        "is not supported (accepted: none, mq-deadline)",
                    ));
                }
            }
        }
        "zone_append" => job.zone_append = flag_value(key)?,
        "seed" => {
            job.seed = Some(
                parse_u64(value)
                    .ok_or_else(|| bad(opt, key, "is not an unsigned 64-bit integer"))?,
            )
        }
        "verify" => {
            if !matches!(value, "none" | "0") {
                return Err(bad(opt, key, "is not supported (accepted: none)"));
            }
        }
        "write_bw_log" | "write_lat_log" | "write_iops_log" => {
            // A bare flag or an empty value means "default prefix" (the job name),
            // resolved when the job is finished. `=0` turns logging off.
            let v = match opt.value.as_deref().map(str::trim) {
                None | Some("") | Some("1") => Some(String::new()),
                Some("0") => None,
                Some(s) => Some(s.to_string()),
            };
            match key {
                "write_bw_log" => job.write_bw_log = v,
                "write_lat_log" => job.write_lat_log = v,
                _ => job.write_iops_log = v,
            }
        }
        "log_avg_msec" => job.log_avg_msec = int_of(opt, key, value, 0, u64::MAX)?,
        "stonewall" => job.stonewall = flag_value(key)?,
        "new_group" => job.new_group = flag_value(key)?,
        "kb_base" => {
            job.kb_base = match value {
                "1024" => 1024,
                "1000" => 1000,
                _ => return Err(bad(opt, key, "is not supported (accepted: 1024, 1000)")),
            }
        }
        other => {
            // Every name in JOB_OPTIONS is handled above.
            return Err(OptionError::Unknown {
                option: other.to_string(),
                location: opt.location.clone(),
                suggestion: None,
            });
        }
    }
    Ok(())
}

/// Apply options of one scope: `kb_base` first, then the rest in order.
fn apply_all(job: &mut JobSpec, opts: &[RawOpt]) -> Result<(), OptionError> {
    let is_kb = |o: &RawOpt| o.key.eq_ignore_ascii_case("kb_base");
    for o in opts.iter().filter(|o| is_kb(o)) {
        apply(job, o)?;
    }
    for o in opts.iter().filter(|o| !is_kb(o)) {
        apply(job, o)?;
    }
    Ok(())
}

fn echo(opts: &[RawOpt]) -> Vec<(String, String)> {
    opts.iter()
        .map(|o| {
            let k = o.key.to_ascii_lowercase();
            (
                canonical(&k).to_string(),
                o.value.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// Build a job from `base` plus its own options.
fn make_job(base: &JobSpec, name: &str, own: &[RawOpt]) -> Result<JobSpec, OptionError> {
    let mut job = base.clone();
    job.name = name.to_string();
    job.job_options = echo(own);
    apply_all(&mut job, own)?;
    for log in [
        &mut job.write_bw_log,
        &mut job.write_lat_log,
        &mut job.write_iops_log,
    ] {
        if log.as_deref() == Some("") {
            *log = Some(job.name.clone());
        }
    }
    Ok(job)
}

/// Strip an inline comment: `;` or `#` preceded by whitespace.
fn strip_inline_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if (b == b';' || b == b'#') && i > 0 && bytes[i - 1].is_ascii_whitespace() {
            return &line[..i];
        }
    }
    line
}

fn split_kv(s: &str) -> (String, Option<String>) {
    match s.split_once('=') {
        Some((k, v)) => (k.trim().to_string(), Some(v.trim().to_string())),
        None => (s.trim().to_string(), None),
    }
}

/// Parse a job file on top of `base` (the command-line globals).
pub fn parse_jobfile(
    text: &str,
    source_name: &str,
    base: &JobSpec,
) -> Result<JobFile, OptionError> {
    enum Section {
        None,
        Global,
        Job(String),
    }
    let mut global = base.clone();
    global.job_options.clear();
    let mut global_options = Vec::new();
    let mut jobs = Vec::new();
    let mut section = Section::None;
    let mut pending: Vec<RawOpt> = Vec::new();

    let finish = |section: &Section,
                  pending: &mut Vec<RawOpt>,
                  global: &mut JobSpec,
                  global_options: &mut Vec<(String, String)>,
                  jobs: &mut Vec<JobSpec>|
     -> Result<(), OptionError> {
        match section {
            Section::None => {}
            Section::Global => {
                apply_all(global, pending)?;
                global_options.extend(echo(pending));
            }
            Section::Job(name) => jobs.push(make_job(global, name, pending)?),
        }
        pending.clear();
        Ok(())
    };

    for (idx, raw_line) in text.lines().enumerate() {
        let lineno = idx + 1;
        let line = raw_line.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        let line = strip_inline_comment(line).trim();
        if let Some(rest) = line.strip_prefix('[') {
            let Some(name) = rest.strip_suffix(']') else {
                return Err(OptionError::Syntax {
                    file: source_name.to_string(),
                    line: lineno,
                    message: format!("malformed section header '{line}' (expected [name])"),
                });
            };
            let name = name.trim();
            if name.is_empty() {
                return Err(OptionError::Syntax {
                    file: source_name.to_string(),
                    line: lineno,
                    message: "empty section name".to_string(),
                });
            }
            finish(
                &section,
                &mut pending,
                &mut global,
                &mut global_options,
                &mut jobs,
            )?;
            section = if name == "global" {
                Section::Global
            } else {
                Section::Job(name.to_string())
            };
            continue;
        }
        let location = match &section {
            Section::None => {
                return Err(OptionError::Syntax {
                    file: source_name.to_string(),
                    line: lineno,
                    message: format!(
                        "option '{line}' outside of a section (start with [global] or [jobname])"
                    ),
                });
            }
            Section::Global => format!("{source_name}:{lineno}, [global]"),
            Section::Job(n) => format!("{source_name}:{lineno}, job '{n}'"),
        };
        let (key, value) = split_kv(line);
        if key.is_empty() {
            return Err(OptionError::Syntax {
                file: source_name.to_string(),
                line: lineno,
                message: format!("missing option name in '{line}'"),
            });
        }
        pending.push(RawOpt {
            key,
            value,
            location,
        });
    }
    finish(
        &section,
        &mut pending,
        &mut global,
        &mut global_options,
        &mut jobs,
    )?;
    Ok(JobFile {
        jobs,
        global_options,
    })
}

/// Parse job-file text with fio's defaults as the base.
pub fn parse_jobfile_text(text: &str, source_name: &str) -> Result<Vec<JobSpec>, OptionError> {
    Ok(parse_jobfile(text, source_name, &JobSpec::default())?.jobs)
}

/// Parse a fio-style command line (without the program name). Bare arguments are job
/// files, read through `read_file`.
pub fn parse_cli(
    args: &[String],
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<Parsed, OptionError> {
    let mut out = Parsed {
        jobs: Vec::new(),
        output_format: OutputFormat::Normal,
        output: None,
        profile: None,
        sets: Vec::new(),
        global_options: Vec::new(),
    };
    // Global state, and the job currently being collected (name, own options).
    let mut global = JobSpec::default();
    let mut current: Option<(String, Vec<RawOpt>)> = None;

    let flush = |current: &mut Option<(String, Vec<RawOpt>)>,
                 global: &JobSpec,
                 jobs: &mut Vec<JobSpec>|
     -> Result<(), OptionError> {
        if let Some((name, own)) = current.take() {
            jobs.push(make_job(global, &name, &own)?);
        }
        Ok(())
    };

    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        let Some(body) = arg.strip_prefix("--") else {
            if arg.starts_with('-') && arg.len() > 1 {
                return Err(OptionError::BadArgument {
                    arg: arg.clone(),
                    message: "options are written --key=value".to_string(),
                });
            }
            // A job file.
            flush(&mut current, &global, &mut out.jobs)?;
            let text = read_file(arg).map_err(|e| OptionError::Io {
                path: arg.clone(),
                message: e.to_string(),
            })?;
            let jf = parse_jobfile(&text, arg, &global)?;
            out.jobs.extend(jf.jobs);
            out.global_options.extend(jf.global_options);
            continue;
        };
        let (key, value) = split_kv(body);
        let lkey = key.to_ascii_lowercase();
        let location = match &current {
            Some((n, _)) => format!("in job '{n}'"),
            None => "global, command line".to_string(),
        };
        if key.is_empty() {
            return Err(OptionError::BadArgument {
                arg: arg.clone(),
                message: "missing option name (write --key=value)".to_string(),
            });
        }
        match lkey.as_str() {
            "name" => {
                let name = value.unwrap_or_default();
                if name.is_empty() {
                    return Err(OptionError::MissingValue {
                        option: "name".into(),
                        location,
                        hint: "write --name=JOBNAME".into(),
                    });
                }
                flush(&mut current, &global, &mut out.jobs)?;
                current = Some((name, Vec::new()));
            }
            "profile" => match value {
                Some(v) if !v.is_empty() => out.profile = Some(v),
                _ => {
                    return Err(OptionError::MissingValue {
                        option: "profile".into(),
                        location,
                        hint: "write --profile=NAME".into(),
                    });
                }
            },
            "output" => match value {
                Some(v) if !v.is_empty() => out.output = Some(v),
                _ => {
                    return Err(OptionError::MissingValue {
                        option: "output".into(),
                        location,
                        hint: "write --output=FILE".into(),
                    });
                }
            },
            "output-format" => {
                let v = value.unwrap_or_default();
                out.output_format = match v.as_str() {
                    "normal" => OutputFormat::Normal,
                    "json" | "json+" => OutputFormat::Json,
                    _ => {
                        return Err(OptionError::BadValue {
                            option: "output-format".into(),
                            value: v,
                            problem: "is not supported (accepted: normal, json, json+)".into(),
                            location,
                        });
                    }
                }
            }
            "set" => {
                let kv = match value {
                    Some(v) => v,
                    None => {
                        let next = args.get(i).cloned();
                        i += 1;
                        next.ok_or_else(|| OptionError::MissingValue {
                            option: "set".into(),
                            location: location.clone(),
                            hint: "write --set key=value or --set=key=value".into(),
                        })?
                    }
                };
                match kv.split_once('=') {
                    Some((k, v)) if !k.trim().is_empty() => {
                        out.sets.push((k.trim().to_string(), v.trim().to_string()))
                    }
                    _ => {
                        return Err(OptionError::BadValue {
                            option: "set".into(),
                            value: kv,
                            problem: "is not key=value (example: --set zones=64)".into(),
                            location,
                        });
                    }
                }
            }
            _ => {
                let opt = RawOpt {
                    key,
                    value,
                    location,
                };
                match &mut current {
                    Some((_, own)) => {
                        // Validate now against the inherited state for early errors.
                        own.push(opt);
                    }
                    None => {
                        apply(&mut global, &opt)?;
                        out.global_options.extend(echo(std::slice::from_ref(&opt)));
                    }
                }
            }
        }
    }
    flush(&mut current, &global, &mut out.jobs)?;
    if out.jobs.is_empty() {
        return Err(OptionError::NoJobs);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn no_files(_: &str) -> std::io::Result<String> {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no such file",
        ))
    }

    fn cli(list: &[&str]) -> Result<Parsed, OptionError> {
        parse_cli(&args(list), &no_files)
    }

    fn one(opts: &[&str]) -> Result<JobSpec, OptionError> {
        let mut v = vec!["--name=j"];
        v.extend_from_slice(opts);
        Ok(cli(&v)?.jobs.remove(0))
    }

    fn err(opts: &[&str]) -> String {
        one(opts).unwrap_err().to_string()
    }

    #[test]
    fn defaults() {
        let j = one(&[]).unwrap();
        assert_eq!(j.name, "j");
        assert_eq!(j.rw, Rw::Read);
        assert_eq!(j.bs, PerDir::all(4096));
        assert_eq!(j.iodepth, 1);
        assert_eq!(j.numjobs, 1);
        assert_eq!(j.size, None);
        assert_eq!(j.offset, Size::Bytes(0));
        assert_eq!(j.rwmixread, 50);
        assert_eq!(j.ioengine, IoEngine::Spdk);
        assert_eq!(j.ioscheduler, IoScheduler::None);
        assert_eq!(j.zonemode, ZoneMode::None);
        assert!(!j.time_based);
    }

    #[test]
    fn rw_values() {
        for (v, rw) in [
            ("read", Rw::Read),
            ("write", Rw::Write),
            ("randread", Rw::RandRead),
            ("randwrite", Rw::RandWrite),
            ("rw", Rw::ReadWrite),
            ("readwrite", Rw::ReadWrite),
            ("randrw", Rw::RandReadWrite),
        ] {
            assert_eq!(one(&[&format!("--rw={v}")]).unwrap().rw, rw);
            assert_eq!(one(&[&format!("--readwrite={v}")]).unwrap().rw, rw);
        }
        assert!(Rw::RandReadWrite.is_random() && Rw::RandReadWrite.reads());
        assert!(Rw::Write.writes() && !Rw::Write.reads() && !Rw::Write.is_random());
        assert!(err(&["--rw=randread:8"]).contains("sequential-skip"));
        assert_eq!(one(&["--rw=trim"]).unwrap().rw, Rw::Trim);
        assert!(Rw::RandTrim.is_random() && Rw::RandTrim.trims() && !Rw::RandTrim.writes());
        assert!(err(&["--rw=trimwrite"]).contains("a trim job and a write job"));
        assert!(err(&["--rw=sideways"]).contains("'sideways'"));
    }

    #[test]
    fn mix() {
        assert_eq!(one(&["--rwmixread=70"]).unwrap().rwmixread, 70);
        assert_eq!(one(&["--rwmixwrite=70"]).unwrap().rwmixread, 30);
        assert!(err(&["--rwmixread=101"]).contains("0..=100"));
        assert!(err(&["--rwmixread=x"]).contains("rwmixread"));
    }

    #[test]
    fn block_sizes() {
        assert_eq!(one(&["--bs=8k"]).unwrap().bs, PerDir::all(8192));
        assert_eq!(one(&["--blocksize=1m"]).unwrap().bs, PerDir::all(1 << 20));
        assert_eq!(
            one(&["--bs=64k,4k"]).unwrap().bs,
            PerDir {
                read: 65536,
                write: 4096,
                trim: 4096
            }
        );
        assert_eq!(
            one(&["--bs=,16k"]).unwrap().bs,
            PerDir {
                read: 4096,
                write: 16384,
                trim: 4096
            }
        );
        assert_eq!(
            one(&["--bs=8k,,4k"]).unwrap().bs,
            PerDir {
                read: 8192,
                write: 4096,
                trim: 4096
            }
        );
        let e = err(&["--bs=4x"]);
        assert!(
            e.contains("'bs'") && e.contains("'4x'") && e.contains("examples"),
            "{e}"
        );
        assert!(err(&["--bs=0"]).contains("multiple of 512"));
        assert!(err(&["--bs=1000"]).contains("multiple of 512"));
        assert!(err(&["--bs=4KiB"]).contains("kb_base"));
        assert_eq!(
            one(&["--bs=4KiB", "--kb_base=1000"]).unwrap().bs,
            PerDir::all(4096)
        );
        assert!(err(&["--bs=4k-16k"]).contains("range"));
        assert!(err(&["--bs=1,2,3,4"]).contains("too many"));
        assert_eq!(one(&["--bs=4k,8k,32m"]).unwrap().bs.trim, 32 << 20);
        assert!(err(&["--bs"]).contains("needs a value"));
    }

    #[test]
    fn integers() {
        let j = one(&["--iodepth=32", "--numjobs=4", "--number_ios=100"]).unwrap();
        assert_eq!((j.iodepth, j.numjobs, j.number_ios), (32, 4, Some(100)));
        assert!(err(&["--iodepth=0"]).contains("iodepth"));
        assert!(err(&["--numjobs=0"]).contains("numjobs"));
        assert!(err(&["--iodepth=-1"]).contains("iodepth"));
        assert_eq!(one(&["--number_ios=0"]).unwrap().number_ios, None);
    }

    #[test]
    fn sizes_and_percent() {
        let j = one(&[
            "--size=1g",
            "--offset=50%",
            "--offset_increment=1m",
            "--io_size=2g",
        ])
        .unwrap();
        assert_eq!(j.size, Some(Size::Bytes(1 << 30)));
        assert_eq!(j.offset, Size::Percent(50.0));
        assert_eq!(j.offset_increment, Size::Bytes(1 << 20));
        assert_eq!(j.io_size, Some(Size::Bytes(2 << 30)));
        assert_eq!(one(&["--io_size=0"]).unwrap().io_size, None, "as fio: size");
        assert_eq!(
            one(&["--io_limit=4k"]).unwrap().io_size,
            Some(Size::Bytes(4096))
        );
        let j = one(&["--size=25%"]).unwrap();
        assert_eq!(j.size.unwrap().resolve(1000), 250);
        assert_eq!(Size::Percent(100.0).resolve(u64::MAX), u64::MAX);
        assert!(err(&["--size=0%"]).contains("percentage"));
        assert!(err(&["--size=150%"]).contains("percentage"));
        assert!(err(&["--size=abc%"]).contains("percentage"));
        assert!(err(&["--size=lots"]).contains("'size'"));
    }

    #[test]
    fn times_and_rates() {
        let j = one(&["--runtime=10", "--ramp_time=500ms", "--time_based"]).unwrap();
        assert_eq!(j.runtime_ns, Some(10_000_000_000));
        assert_eq!(j.ramp_time_ns, 500_000_000);
        assert!(j.time_based);
        assert_eq!(
            one(&["--runtime=2m"]).unwrap().runtime_ns,
            Some(120_000_000_000)
        );
        assert_eq!(one(&["--runtime=0"]).unwrap().runtime_ns, None);
        assert!(err(&["--runtime=soon"]).contains("not a time"));
        assert_eq!(
            one(&["--rate=100m"]).unwrap().rate,
            PerDir::all(Some(100 << 20))
        );
        assert_eq!(
            one(&["--rate=,50m"]).unwrap().rate,
            PerDir {
                read: None,
                write: Some(50 << 20),
                trim: None
            }
        );
        assert_eq!(
            one(&["--rate_iops=1000,2k"]).unwrap().rate_iops,
            PerDir {
                read: Some(1000),
                write: Some(2048),
                trim: None
            }
        );
        assert!(err(&["--rate=fast"]).contains("bytes/s"));
    }

    #[test]
    fn booleans() {
        let j = one(&[
            "--group_reporting",
            "--direct=1",
            "--thread",
            "--zone_append=1",
            "--wait_for_previous",
            "--new_group",
        ])
        .unwrap();
        assert!(j.group_reporting && j.direct && j.thread && j.zone_append);
        assert!(j.stonewall && j.new_group);
        assert!(!one(&["--direct=0"]).unwrap().direct);
        assert!(err(&["--direct=maybe"]).contains("boolean"));
    }

    #[test]
    fn zones_engines_misc() {
        let j = one(&[
            "--zonemode=zbd",
            "--max_open_zones=14",
            "--job_max_open_zones=2",
            "--zonerange=1g",
            "--zonesize=1g",
            "--ioengine=io_uring",
            "--ioscheduler=mq-deadline",
            "--seed=42",
            "--filename=/dev/nvme0n2",
            "--verify=none",
            "--description=hello world",
            "--log_avg_msec=1000",
        ])
        .unwrap();
        assert_eq!(j.zonemode, ZoneMode::Zbd);
        assert_eq!(j.max_open_zones, Some(14));
        assert_eq!(j.job_max_open_zones, Some(2));
        assert_eq!(j.zonerange, Some(1 << 30));
        assert_eq!(j.zonesize, Some(1 << 30));
        assert_eq!(j.ioengine, IoEngine::IoUring);
        assert_eq!(j.ioscheduler, IoScheduler::MqDeadline);
        assert_eq!(j.seed, Some(42));
        assert_eq!(j.filename.as_deref(), Some("/dev/nvme0n2"));
        assert_eq!(j.description.as_deref(), Some("hello world"));
        assert_eq!(j.log_avg_msec, 1000);
        assert_eq!(one(&["--randseed=0x10"]).unwrap().seed, Some(16));
        let e = err(&["--ioengine=libaio"]);
        assert!(e.contains("spdk, io_uring") && e.contains("libaio"), "{e}");
        assert!(err(&["--zonemode=strided"]).contains("none, zbd"));
        assert!(err(&["--ioscheduler=bfq"]).contains("mq-deadline"));
        assert!(err(&["--verify=crc32c"]).contains("accepted: none"));
    }

    #[test]
    fn logs() {
        let j = one(&["--write_bw_log", "--write_lat_log=lat"]).unwrap();
        assert_eq!(j.write_bw_log.as_deref(), Some("j"));
        assert_eq!(j.write_lat_log.as_deref(), Some("lat"));
        assert_eq!(j.write_iops_log, None);
        // A global bare flag takes each job's own name.
        let p = cli(&["--write_iops_log", "--name=a", "--name=b"]).unwrap();
        assert_eq!(p.jobs[0].write_iops_log.as_deref(), Some("a"));
        assert_eq!(p.jobs[1].write_iops_log.as_deref(), Some("b"));
    }

    #[test]
    fn unknown_option_suggests() {
        let e = err(&["--blocksizee=4k"]);
        assert_eq!(
            e,
            "unknown option 'blocksizee' (in job 'j'); did you mean 'blocksize'?"
        );
        let e = err(&["--zzzzzzzzzz=1"]);
        assert!(!e.contains("did you mean"), "{e}");
    }

    #[test]
    fn cli_globals_and_jobs() {
        let p = cli(&[
            "--bs=8k",
            "--iodepth=4",
            "--name=a",
            "--rw=write",
            "--name=b",
            "--iodepth=16",
        ])
        .unwrap();
        assert_eq!(p.jobs.len(), 2);
        assert_eq!(p.jobs[0].name, "a");
        assert_eq!(p.jobs[0].rw, Rw::Write);
        assert_eq!(p.jobs[0].bs, PerDir::all(8192));
        assert_eq!(p.jobs[0].iodepth, 4);
        assert_eq!(p.jobs[1].rw, Rw::Read);
        assert_eq!(p.jobs[1].iodepth, 16);
        assert_eq!(p.jobs[1].bs, PerDir::all(8192));
        assert_eq!(
            p.global_options,
            vec![("bs".into(), "8k".into()), ("iodepth".into(), "4".into())]
        );
        assert_eq!(p.jobs[0].job_options, vec![("rw".into(), "write".into())]);
    }

    #[test]
    fn cli_only_options() {
        let p = cli(&[
            "--profile=zn540",
            "--set",
            "zones=64",
            "--set=gc.threshold=0.2",
            "--output-format=json+",
            "--output=out.json",
            "--name=a",
        ])
        .unwrap();
        assert_eq!(p.profile.as_deref(), Some("zn540"));
        assert_eq!(
            p.sets,
            vec![
                ("zones".into(), "64".into()),
                ("gc.threshold".into(), "0.2".into())
            ]
        );
        assert_eq!(p.output_format, OutputFormat::Json);
        assert_eq!(p.output.as_deref(), Some("out.json"));
        assert!(cli(&["--name=a", "--set"]).is_err());
        assert!(
            cli(&["--name=a", "--set", "nokey"])
                .unwrap_err()
                .to_string()
                .contains("key=value")
        );
        assert!(
            cli(&["--name=a", "--output-format=terse"])
                .unwrap_err()
                .to_string()
                .contains("normal, json")
        );
        assert_eq!(cli(&["--bs=4k"]).unwrap_err(), OptionError::NoJobs);
        assert!(cli(&["-x", "--name=a"]).is_err());
    }

    const FILE: &str = "\
; a comment
# another
[global]
bs=128k
ioengine=io_uring
zonemode=zbd

[seq-write]
rw=write
time_based
runtime=10s   ; inline comment

[rand-read]
rw = randread
bs=4k
";

    #[test]
    fn jobfile_globals() {
        let jobs = parse_jobfile_text(FILE, "t.fio").unwrap();
        assert_eq!(jobs.len(), 2);
        let (a, b) = (&jobs[0], &jobs[1]);
        assert_eq!(a.name, "seq-write");
        assert_eq!(a.rw, Rw::Write);
        assert_eq!(a.bs, PerDir::all(128 << 10));
        assert!(a.time_based);
        assert_eq!(a.runtime_ns, Some(10_000_000_000));
        assert_eq!(a.ioengine, IoEngine::IoUring);
        assert_eq!(b.rw, Rw::RandRead);
        assert_eq!(b.bs, PerDir::all(4096));
        assert_eq!(b.zonemode, ZoneMode::Zbd);
        let jf = parse_jobfile(FILE, "t.fio", &JobSpec::default()).unwrap();
        assert_eq!(jf.global_options.len(), 3);
    }

    #[test]
    fn jobfile_global_after_job_only_affects_later_jobs() {
        let text = "[a]\n[global]\niodepth=8\n[b]\n";
        let jobs = parse_jobfile_text(text, "t").unwrap();
        assert_eq!(jobs[0].iodepth, 1);
        assert_eq!(jobs[1].iodepth, 8);
    }

    #[test]
    fn jobfile_errors() {
        let e = parse_jobfile_text("bs=4k\n", "t.fio")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.fio:1:") && e.contains("outside"), "{e}");
        let e = parse_jobfile_text("[a\n", "t.fio").unwrap_err().to_string();
        assert!(e.contains("t.fio:1"), "{e}");
        let e = parse_jobfile_text("[a]\nbs=4x\n", "t.fio")
            .unwrap_err()
            .to_string();
        assert!(e.contains("t.fio:2, job 'a'") && e.contains("'bs'"), "{e}");
        let e = parse_jobfile_text("[a]\nprofile=zn540\n", "t.fio")
            .unwrap_err()
            .to_string();
        assert!(e.contains("command line"), "{e}");
        let e = parse_jobfile_text("[a]\nrw\n", "t.fio")
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs a value"), "{e}");
    }

    #[test]
    fn cli_globals_reach_jobfile() {
        let read = |p: &str| -> std::io::Result<String> {
            assert_eq!(p, "x.fio");
            Ok("[global]\nrw=write\n[f1]\n".to_string())
        };
        let p = parse_cli(
            &args(&["--iodepth=8", "x.fio", "--numjobs=2", "--name=c", "--bs=8k"]),
            &read,
        )
        .unwrap();
        assert_eq!(p.jobs.len(), 2);
        assert_eq!(p.jobs[0].name, "f1");
        assert_eq!(p.jobs[0].iodepth, 8);
        assert_eq!(p.jobs[0].numjobs, 1);
        assert_eq!(p.jobs[0].rw, Rw::Write);
        // The job file's [global] does not leak to later command-line jobs.
        assert_eq!(p.jobs[1].rw, Rw::Read);
        assert_eq!(p.jobs[1].numjobs, 2);
        assert_eq!(p.jobs[1].iodepth, 8);
        assert!(
            parse_cli(&args(&["missing.fio"]), &no_files)
                .unwrap_err()
                .to_string()
                .contains("missing.fio")
        );
    }

    #[test]
    fn kb_base_applies_first_in_section() {
        let jobs = parse_jobfile_text("[a]\nsize=1MiB\nkb_base=1000\n", "t").unwrap();
        assert_eq!(jobs[0].size, Some(Size::Bytes(1 << 20)));
    }

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn cli_never_panics(v in proptest::collection::vec("(--)?[a-z_=%,:.0-9kKmMiB -]{0,20}", 0..8)) {
                let _ = parse_cli(&v, &|_| Ok("[x]\nbs=4k\n".to_string()));
            }

            #[test]
            fn cli_values_never_panic(key in proptest::sample::select(JOB_OPTIONS), val in "\\PC{0,16}") {
                let a = vec!["--name=x".to_string(), format!("--{key}={val}")];
                let _ = parse_cli(&a, &|_| Ok(String::new()));
            }

            #[test]
            fn jobfile_never_panics(text in "\\PC{0,200}") {
                let _ = parse_jobfile_text(&text, "p.fio");
            }

            #[test]
            fn jobfile_lines_never_panic(lines in proptest::collection::vec("[\\[\\]a-z_=;# %0-9kmg.,]{0,24}", 0..12)) {
                let _ = parse_jobfile_text(&lines.join("\n"), "p.fio");
            }
        }
    }
}
