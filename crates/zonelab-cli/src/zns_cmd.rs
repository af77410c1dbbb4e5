//! `zonelab zns`: device tools on a device image file, shaped like nvme-cli's zns plugin.
//!
//! Each invocation loads the image, runs one command on the simulated device at the image's
//! virtual clock, and — only if the command succeeded — saves the device with the clock moved to
//! the command's completion. A sequence of invocations is therefore one consistent timeline, and
//! a command that fails leaves the image byte for byte as it was. Each command prints its
//! simulated latency (completion minus submission).
//!
//! Option names follow nvme-cli (`-s` start LBA, `-z` zone send action or data size, `-a` select
//! all, `-d` data file or descriptor count, `-c` 0's based block count, `-o` output format);
//! numbers are decimal or `0x` hex.

use crate::image::{self, Image};
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use zonelab_device::{
    Completion, Lba, NvmeStatus, PayloadMode, Profile, ReadData, ReportFilter, WriteData, Zone,
    ZoneAction, ZoneId, ZoneState, ZoneType, ZonedDevice,
};
use zonelab_sim::Nanos;

#[derive(Args)]
#[command(
    after_help = "Examples:\n  zonelab zns create dev.img --profile zn540 --set zones=16\n  \
                  zonelab zns write dev.img -s 0 -d data.bin\n  \
                  zonelab zns report-zones dev.img --state imp-open\n  \
                  zonelab zns zone-mgmt-send dev.img -s 0 -z finish"
)]
pub struct ZnsArgs {
    #[command(subcommand)]
    cmd: ZnsCmd,
}

#[derive(Subcommand)]
enum ZnsCmd {
    /// Create a device image holding an empty zoned namespace.
    Create(CreateArgs),
    /// Identify Namespace (NVM and Zoned Namespace command sets).
    IdNs(IdNsArgs),
    /// Report Zones (Zone Management Receive): the zone descriptors.
    ReportZones(ReportArgs),
    /// Zone Management Send: open, close, finish, reset or offline a zone (or all zones).
    ZoneMgmtSend(MgmtArgs),
    /// Explicitly open a zone (zone-mgmt-send --zsa open).
    OpenZone(ZoneSelect),
    /// Close a zone (zone-mgmt-send --zsa close).
    CloseZone(ZoneSelect),
    /// Finish a zone (zone-mgmt-send --zsa finish).
    FinishZone(ZoneSelect),
    /// Reset a zone (zone-mgmt-send --zsa reset).
    ResetZone(ZoneSelect),
    /// Offline a read-only zone (zone-mgmt-send --zsa offline).
    OfflineZone(ZoneSelect),
    /// Write blocks at a zone's write pointer.
    Write(WriteArgs),
    /// Zone Append: the device picks the LBA (the zone's write pointer) and reports it.
    ZoneAppend(AppendArgs),
    /// Read blocks (unwritten blocks read as zeros).
    Read(ReadArgs),
    /// ZNS+ zone_compaction: copy blocks inside the device (seed 000 §3.2.1). The i-th source
    /// block goes to the i-th destination; destinations of a zone rise from its write pointer
    /// and may skip blocks (which are padded).
    ZoneCompaction(CompactionArgs),
    /// ZNS+ TL_open: reopen a Full zone for threaded logging (sparse sequential overwrite,
    /// seed 000 §3.2.2). Valid blocks are kept and plugged by the device; writes may go only to
    /// the other blocks, at or after the write pointer.
    TlOpen(TlOpenArgs),
    /// ZNS+ identify_mapping: the LBA bit fields that name a chunk's flash chip group and chip
    /// (seed 000 §3.3.1).
    IdentifyMapping(IdNsArgs),
    /// Test hook: simulate a media failure that turns a zone read-only or offline.
    ///
    /// This is not an NVMe command; real drives make this transition themselves when their
    /// media fails. Use it to test how software copes with read-only and offline zones.
    Inject(InjectArgs),
}

#[derive(Args)]
struct CompactionArgs {
    /// Device image file.
    image: PathBuf,
    /// Source blocks: comma-separated LBAs or ranges START+COUNT, e.g. 0+16,40,0x100+8.
    #[arg(long, value_parser = parse_lba_list)]
    src: LbaList,
    /// Destination blocks, as many as sources, in the same form.
    #[arg(long, value_parser = parse_lba_list)]
    dst: LbaList,
}

#[derive(Args)]
struct TlOpenArgs {
    /// Device image file.
    image: PathBuf,
    /// Start LBA of the (Full) zone.
    #[arg(long, short = 's', visible_alias = "start-lba", value_parser = parse_num)]
    zslba: u64,
    /// Valid blocks, as offsets in the zone: comma-separated offsets or START+COUNT ranges
    /// (default: none, every block may be overwritten).
    #[arg(long, value_parser = parse_lba_list)]
    valid: Option<LbaList>,
}

/// A list of LBAs (or zone offsets) given on the command line.
#[derive(Clone, Debug)]
struct LbaList(Vec<u64>);

/// Most blocks a list on the command line may name.
const MAX_LIST: u64 = 1 << 20;

/// `A`, `A+N` (N blocks from A), comma-separated.
fn parse_lba_list(s: &str) -> Result<LbaList, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (start, count) = match item.split_once('+') {
            Some((a, n)) => (parse_num(a)?, parse_num(n)?),
            None => (parse_num(item)?, 1),
        };
        if count == 0 {
            return Err(format!("'{item}': a range needs at least one block"));
        }
        if out.len() as u64 + count > MAX_LIST {
            return Err(format!("more than {MAX_LIST} blocks in one list"));
        }
        let end = start
            .checked_add(count)
            .ok_or_else(|| format!("'{item}' runs past the largest LBA"))?;
        out.extend(start..end);
    }
    if out.is_empty() {
        return Err("an empty list: give LBAs like 0+16,40".into());
    }
    Ok(LbaList(out))
}

#[derive(Clone, Copy, ValueEnum)]
enum OutputFormat {
    Normal,
    Json,
}

#[derive(Args)]
struct CreateArgs {
    /// Device image file to create.
    image: PathBuf,
    /// Device profile: a built-in name (see `zonelab profiles`) or a .toml path.
    #[arg(long, short = 'p')]
    profile: String,
    /// Override a profile field, e.g. --set zones=16 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Overwrite an existing file.
    #[arg(long, short = 'f')]
    force: bool,
}

#[derive(Args)]
struct IdNsArgs {
    /// Device image file.
    image: PathBuf,
    /// Output format.
    #[arg(
        long = "output-format",
        short = 'o',
        value_enum,
        default_value = "normal"
    )]
    output: OutputFormat,
}

#[derive(Args)]
struct ReportArgs {
    /// Device image file.
    image: PathBuf,
    /// Report zones from the zone holding this LBA.
    #[arg(long = "start-lba", short = 's', value_parser = parse_num, default_value = "0")]
    start_lba: u64,
    /// Report at most this many zone descriptors (default: all).
    #[arg(long, short = 'd', value_parser = parse_num)]
    descs: Option<u64>,
    /// Only zones in this state: empty, imp-open, exp-open, closed, full, read-only, offline
    /// (or nvme-cli's state numbers 1-7; `all` for every zone).
    #[arg(long, short = 'S', default_value = "all")]
    state: ReportFilter,
    /// Output format.
    #[arg(
        long = "output-format",
        short = 'o',
        value_enum,
        default_value = "normal"
    )]
    output: OutputFormat,
}

#[derive(Args)]
struct MgmtArgs {
    /// Device image file.
    image: PathBuf,
    /// Start LBA of the zone.
    #[arg(long, short = 's', visible_alias = "start-lba", value_parser = parse_num, default_value = "0")]
    zslba: u64,
    /// Zone Send Action: open, close, finish, reset, offline (or nvme-cli's codes 1-5:
    /// 1 close, 2 finish, 3 open, 4 reset, 5 offline).
    #[arg(long, short = 'z', value_parser = parse_zsa)]
    zsa: ZoneAction,
    /// Apply the action to every zone it applies to (zslba is ignored).
    #[arg(long, short = 'a')]
    select_all: bool,
}

#[derive(Args)]
struct ZoneSelect {
    /// Device image file.
    image: PathBuf,
    /// Start LBA of the zone.
    #[arg(long = "start-lba", short = 's', visible_alias = "zslba", value_parser = parse_num, default_value = "0")]
    zslba: u64,
    /// Apply to every zone the action applies to.
    #[arg(long, short = 'a')]
    select_all: bool,
}

#[derive(Args)]
struct WriteArgs {
    /// Device image file.
    image: PathBuf,
    /// First LBA to write (must be the zone's write pointer).
    #[arg(long, short = 's', visible_alias = "start-block", value_parser = parse_num)]
    slba: u64,
    /// File with the data ('-' for stdin); its length must be a multiple of the LBA size.
    #[arg(long, short = 'd')]
    data: String,
    /// Bytes to take from the data (default: all of it).
    #[arg(long = "data-size", short = 'z', value_parser = parse_num)]
    data_size: Option<u64>,
}

#[derive(Args)]
struct AppendArgs {
    /// Device image file.
    image: PathBuf,
    /// Start LBA of the zone to append to.
    #[arg(long, short = 's', value_parser = parse_num)]
    zslba: u64,
    /// File with the data ('-' for stdin); its length must be a multiple of the LBA size.
    #[arg(long, short = 'd')]
    data: String,
    /// Bytes to take from the data (default: all of it).
    #[arg(long = "data-size", short = 'z', value_parser = parse_num)]
    data_size: Option<u64>,
}

#[derive(Args)]
struct ReadArgs {
    /// Device image file.
    image: PathBuf,
    /// First LBA to read.
    #[arg(long, short = 's', visible_alias = "start-block", value_parser = parse_num)]
    slba: u64,
    /// Number of blocks to read (1-based).
    #[arg(long, value_parser = parse_num, conflicts_with = "block_count", required_unless_present = "block_count")]
    nlb: Option<u64>,
    /// Number of blocks to read, 0's based as in nvme-cli (0 reads one block).
    #[arg(long = "block-count", short = 'c', value_parser = parse_num)]
    block_count: Option<u64>,
    /// Write the data to this file instead of stdout.
    #[arg(long, short = 'd')]
    data: Option<PathBuf>,
}

#[derive(Args)]
struct InjectArgs {
    /// Device image file.
    image: PathBuf,
    /// Zone index (0-based).
    #[arg(long, value_parser = parse_num)]
    zone: u64,
    /// State the failure leaves the zone in: read-only or offline.
    #[arg(long)]
    state: ZoneState,
}

/// A number in decimal or `0x` hex.
fn parse_num(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse(),
    };
    r.map_err(|_| format!("'{s}' is not a number: use decimal (4096) or hex (0x1000)"))
}

/// A Zone Send Action by name or by nvme-cli's numeric code.
fn parse_zsa(s: &str) -> Result<ZoneAction, String> {
    let by_code = match parse_num(s) {
        Ok(1) => Some(ZoneAction::Close),
        Ok(2) => Some(ZoneAction::Finish),
        Ok(3) => Some(ZoneAction::Open),
        Ok(4) => Some(ZoneAction::Reset),
        Ok(5) => Some(ZoneAction::Offline),
        _ => None,
    };
    match by_code {
        Some(a) => Ok(a),
        None => s.trim().to_ascii_lowercase().parse(),
    }
}

/// nvme-cli's Zone Send Action code.
fn zsa_code(a: ZoneAction) -> u8 {
    match a {
        ZoneAction::Close => 1,
        ZoneAction::Finish => 2,
        ZoneAction::Open => 3,
        ZoneAction::Reset => 4,
        ZoneAction::Offline => 5,
    }
}

pub fn run(a: ZnsArgs) -> Result<ExitCode> {
    match a.cmd {
        ZnsCmd::Create(c) => create(c),
        ZnsCmd::IdNs(c) => id_ns(c),
        ZnsCmd::ReportZones(c) => report_zones(c),
        ZnsCmd::ZoneMgmtSend(c) => {
            zone_mgmt("zone-mgmt-send", &c.image, c.zsa, c.zslba, c.select_all)
        }
        ZnsCmd::OpenZone(c) => zone_mgmt(
            "open-zone",
            &c.image,
            ZoneAction::Open,
            c.zslba,
            c.select_all,
        ),
        ZnsCmd::CloseZone(c) => zone_mgmt(
            "close-zone",
            &c.image,
            ZoneAction::Close,
            c.zslba,
            c.select_all,
        ),
        ZnsCmd::FinishZone(c) => zone_mgmt(
            "finish-zone",
            &c.image,
            ZoneAction::Finish,
            c.zslba,
            c.select_all,
        ),
        ZnsCmd::ResetZone(c) => zone_mgmt(
            "reset-zone",
            &c.image,
            ZoneAction::Reset,
            c.zslba,
            c.select_all,
        ),
        ZnsCmd::OfflineZone(c) => zone_mgmt(
            "offline-zone",
            &c.image,
            ZoneAction::Offline,
            c.zslba,
            c.select_all,
        ),
        ZnsCmd::Write(c) => write(c),
        ZnsCmd::ZoneAppend(c) => zone_append(c),
        ZnsCmd::Read(c) => read(c),
        ZnsCmd::ZoneCompaction(c) => zone_compaction(c),
        ZnsCmd::TlOpen(c) => tl_open(c),
        ZnsCmd::IdentifyMapping(c) => identify_mapping(c),
        ZnsCmd::Inject(c) => inject(c),
    }
}

fn zone_compaction(a: CompactionArgs) -> Result<ExitCode> {
    let (src, dst) = (&a.src.0, &a.dst.0);
    if src.len() != dst.len() {
        bail!(
            "--src names {} blocks but --dst {}: give one destination per source block",
            src.len(),
            dst.len()
        );
    }
    let mut img = open(&a.image)?;
    let before = img.device.znsplus_counters();
    let now = img.clock;
    let src: Vec<Lba> = src.iter().map(|&l| Lba(l)).collect();
    let dst: Vec<Lba> = dst.iter().map(|&l| Lba(l)).collect();
    // Which block breaks which rule, if the device will refuse the command.
    let refusal = img.device.compaction_refusal(&src, &dst);
    let mut c = img.device.zone_compaction(now, now, &src, &dst);
    if let Some(ticket) = img.device.take_ticket() {
        c.done = img.device.ticket_completion(ticket);
    }
    let after = img.device.znsplus_counters();
    match finish(&a.image, &mut img, now, c)? {
        Ok((latency, _)) => {
            println!(
                "zone-compaction: Success, {} blocks copied ({} chunks by copyback, {} by read and program)",
                src.len(),
                after.copybacks - before.copybacks,
                after.readprogram_copies - before.readprogram_copies
            );
            println!("latency: {latency}");
            Ok(ExitCode::SUCCESS)
        }
        Err(s) => match refusal {
            Some((r, why)) if r == s => {
                eprintln!("zonelab: zone-compaction: {s}: {why}");
                Ok(ExitCode::from(1))
            }
            _ => Ok(nvme_error("zone-compaction", s)),
        },
    }
}

fn tl_open(a: TlOpenArgs) -> Result<ExitCode> {
    let mut img = open(&a.image)?;
    let zone = match img.device.zones().zone_at_start(Lba(a.zslba)) {
        Ok(z) => img.device.zone(z).clone(),
        Err(s) => return Ok(nvme_error("tl-open", s)),
    };
    let mut valid = vec![false; zone.capacity as usize];
    for &off in a.valid.as_ref().map_or(&[][..], |v| &v.0[..]) {
        if off >= zone.capacity {
            bail!(
                "valid block offset {off} is outside the zone's {} writable blocks",
                zone.capacity
            );
        }
        valid[off as usize] = true;
    }
    let n = valid.iter().filter(|&&v| v).count();
    let now = img.clock;
    let c = img.device.tl_open(
        now,
        now,
        &[zonelab_device::TlOpenZone {
            zslba: Lba(a.zslba),
            valid,
        }],
    );
    match finish(&a.image, &mut img, now, c)? {
        Ok((latency, _)) => {
            println!(
                "tl-open: Success, zone:{:#x} valid blocks:{n} of {}",
                a.zslba, zone.capacity
            );
            println!("latency: {latency}");
            Ok(ExitCode::SUCCESS)
        }
        // TL_open reopens a Full zone only (seed 000 §3.2.2); say so rather than the general
        // hint about state transitions.
        Err(s @ NvmeStatus::InvalidZoneStateTransition) if zone.state != ZoneState::Full => {
            eprintln!(
                "zonelab: tl-open: {s}: zone {:#x} is {}; TL_open reopens a FULL zone for threaded logging (fill or finish it first)",
                a.zslba,
                zone.state.nvme_cli_name()
            );
            Ok(ExitCode::from(1))
        }
        Err(s) => Ok(nvme_error("tl-open", s)),
    }
}

fn identify_mapping(a: IdNsArgs) -> Result<ExitCode> {
    let mut img = open(&a.image)?;
    let now = img.clock;
    let (c, m) = img.device.identify_mapping(now, now);
    if let Err(s) = c.status {
        return Ok(nvme_error("identify-mapping", s));
    }
    let bits = |f: Option<zonelab_device::BitField>| {
        f.map_or(json!(null), |f| json!({ "lsb": f.lsb, "bits": f.bits }))
    };
    match a.output {
        OutputFormat::Json => {
            let v = json!({
                "lbas_per_chunk": m.lbas_per_chunk,
                "zone_size": m.zone_size,
                "fcgs": m.fcgs,
                "chips_per_fcg": m.chips,
                "fcg_id": bits(m.fcg_id),
                "chip_id": bits(m.chip_id),
            });
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        OutputFormat::Normal => {
            let show = |f: Option<zonelab_device::BitField>, what: &str| match f {
                Some(f) if f.bits > 0 => format!(
                    "LBA bits {}..{} ({} bits)",
                    f.lsb,
                    f.lsb + f.bits - 1,
                    f.bits
                ),
                Some(_) => "no bits (only one)".to_string(),
                None => format!("not a bit field ({what})"),
            };
            println!("lbas per chunk : {}", m.lbas_per_chunk);
            println!("zone size      : {}", m.zone_size);
            println!(
                "FCG ID         : {} of {} groups",
                show(m.fcg_id, "zone index mod groups"),
                m.fcgs
            );
            println!(
                "chip ID        : {} of {} chips",
                show(m.chip_id, "chunk index mod chips"),
                m.chips
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Loads an image for the tools, which exchange real bytes (full payload).
fn open(path: &Path) -> Result<Image> {
    let img = image::load(path)?;
    if img.device.payload_mode() != PayloadMode::Full {
        bail!(
            "{}: the image keeps fingerprints instead of data, so its blocks cannot be read or \
             written as bytes; create a new image with `zonelab zns create`",
            path.display()
        );
    }
    Ok(img)
}

/// Prints an NVMe error the way the tools report every failed command; the image is not saved.
fn nvme_error(cmd: &str, s: NvmeStatus) -> ExitCode {
    eprintln!("zonelab: {cmd}: {s}: {}", s.hint());
    ExitCode::from(1)
}

/// [`nvme_error`] for a write or append at `lba`: a write refused in a TL_opened zone gets the
/// rule of that zone (seed 000 §3.2.2) instead of the sequential-zone hint.
fn write_error(cmd: &str, s: NvmeStatus, d: &ZonedDevice, lba: u64) -> ExitCode {
    let tl = d
        .zones()
        .zone_of(Lba(lba))
        .ok()
        .filter(|&z| d.is_tl_open(z));
    match tl {
        Some(z) if s == NvmeStatus::ZoneInvalidWrite => {
            let zone = d.zone(z);
            let append = if cmd == "zone-append" {
                "; a zone append lands at the write pointer, so it is refused when any block it would cover from there was valid at TL_open (append fewer blocks, only up to the next valid one, or write past it with `zonelab zns write`)"
            } else {
                ""
            };
            eprintln!(
                "zonelab: {cmd}: {s}: zone {:#x} is TL_opened (threaded logging): writes go at or after its write pointer ({:#x}) to blocks that were not valid at TL_open, and the device plugs the valid blocks the write pointer passes{append}",
                zone.start.0, zone.wp.0
            );
            ExitCode::from(1)
        }
        _ => nvme_error(cmd, s),
    }
}

/// Outcome of one command on an image: saves it (clock at the completion) if it succeeded.
/// Returns the latency, or the error status.
fn finish(
    path: &Path,
    img: &mut Image,
    now: Nanos,
    c: Completion,
) -> Result<Result<(Nanos, Option<Lba>), NvmeStatus>> {
    match c.status {
        Err(s) => Ok(Err(s)),
        Ok(lba) => {
            img.clock = c.done.max(now);
            image::save(path, img, true)?;
            Ok(Ok((c.done - now.min(c.done), lba)))
        }
    }
}

fn mib(lbas: u64, lba_size: u64) -> String {
    let bytes = lbas as f64 * lba_size as f64;
    let m = bytes / (1u64 << 20) as f64;
    if m.fract() == 0.0 {
        format!("{m:.0} MiB")
    } else {
        format!("{m:.2} MiB")
    }
}

fn create(a: CreateArgs) -> Result<ExitCode> {
    if a.image.exists() && !a.force {
        bail!(
            "{} already exists; use --force to overwrite it",
            a.image.display()
        );
    }
    let overrides = Profile::parse_overrides(&a.set)?;
    let profile = Profile::load(&a.profile, &overrides)?;
    if profile.namespace != zonelab_device::NamespaceKind::Zoned {
        // A companion device for the file system's metadata (zonelab mkfs --companion).
        let device = zonelab_device::ConventionalDevice::new(profile, PayloadMode::Full)?;
        let img = image::ConventionalImage {
            clock: Nanos::ZERO,
            device,
        };
        image::save_conventional(&a.image, &img, a.force)?;
        let d = &img.device;
        println!(
            "created {}: profile {}, conventional namespace of {:#x} LBAs ({}), a companion device for `zonelab mkfs --companion` (the zns commands need a zoned image)",
            a.image.display(),
            d.profile().name,
            d.total_lbas(),
            mib(d.total_lbas(), d.lba_size())
        );
        return Ok(ExitCode::SUCCESS);
    }
    let device = ZonedDevice::new(profile, PayloadMode::Full)?;
    let img = Image {
        clock: Nanos::ZERO,
        device,
    };
    image::save(&a.image, &img, a.force)?;
    let d = &img.device;
    let g = d.zones().geometry();
    let lba = d.lba_size();
    println!(
        "created {}: profile {}, {} zones ({} conventional)",
        a.image.display(),
        d.profile().name,
        g.zones,
        g.conventional_zones
    );
    println!(
        "zone size     : {:#x} LBAs ({})",
        g.zone_size,
        mib(g.zone_size, lba)
    );
    println!(
        "zone capacity : {:#x} LBAs ({})",
        g.zone_capacity,
        mib(g.zone_capacity, lba)
    );
    println!("max open      : {}", g.max_open);
    println!("max active    : {}", g.max_active);
    println!("lba size      : {lba} bytes");
    println!(
        "capacity      : {:#x} LBAs ({})",
        g.total_lbas(),
        mib(g.total_lbas(), lba)
    );
    Ok(ExitCode::SUCCESS)
}

fn id_ns(a: IdNsArgs) -> Result<ExitCode> {
    let img = open(&a.image)?;
    let d = &img.device;
    let g = d.zones().geometry();
    let nsze = g.total_lbas();
    let lbads = d.lba_size().trailing_zeros();
    // Reads may cross zone boundaries (Read Across Zone Boundaries, OZCS bit 0).
    let ozcs = 1u16;
    match a.output {
        OutputFormat::Json => {
            let v = json!({
                "nsze": nsze,
                "ncap": nsze,
                "nuse": nsze,
                "nlbaf": 0,
                "flbas": 0,
                "lbafs": [{ "ms": 0, "ds": lbads, "rp": 0 }],
                "zoc": 0,
                "ozcs": ozcs,
                "mar": g.mar(),
                "mor": g.mor(),
                "rrl": 0,
                "frl": 0,
                "lbafe": [{ "zsze": g.zone_size, "zdes": 0 }],
                "zonelab": {
                    "profile": d.profile().name,
                    "zones": g.zones,
                    "conventional_zones": g.conventional_zones,
                    "zone_size": g.zone_size,
                    "zone_capacity": g.zone_capacity,
                    "lba_size": d.lba_size(),
                    "max_open": g.max_open,
                    "max_active": g.max_active,
                    "open_zones": d.zones().open_count(),
                    "active_zones": d.zones().active_count(),
                    "clock_ns": img.clock.0,
                }
            });
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        OutputFormat::Normal => {
            println!("NVME Identify Namespace 1:");
            println!("nsze    : {nsze:#x}");
            println!("ncap    : {nsze:#x}");
            println!("nuse    : {nsze:#x}");
            println!("nlbaf   : 0");
            println!("flbas   : 0");
            println!("lbaf  0 : ms:0   lbads:{lbads} rp:0 (in use)");
            println!();
            println!("ZNS Command Set Identify Namespace:");
            println!("zoc     : 0");
            println!("ozcs    : {ozcs}");
            println!("mar     : {:#x}", g.mar());
            println!("mor     : {:#x}", g.mor());
            println!("rrl     : 0");
            println!("frl     : 0");
            println!("lbafe  0: zsze:{:#x} zdes:0 (in use)", g.zone_size);
            println!();
            let lba = d.lba_size();
            println!("ZoneLab:");
            println!("profile       : {}", d.profile().name);
            println!(
                "zones         : {} ({} conventional)",
                g.zones, g.conventional_zones
            );
            println!(
                "zone size     : {:#x} LBAs ({})",
                g.zone_size,
                mib(g.zone_size, lba)
            );
            println!(
                "zone capacity : {:#x} LBAs ({})",
                g.zone_capacity,
                mib(g.zone_capacity, lba)
            );
            println!("lba size      : {lba} bytes");
            println!(
                "max open      : {} ({} open now)",
                g.max_open,
                d.zones().open_count()
            );
            println!(
                "max active    : {} ({} active now)",
                g.max_active,
                d.zones().active_count()
            );
            println!("clock         : {}", img.clock);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn state_name(z: &Zone) -> &'static str {
    z.state.nvme_cli_name()
}

fn type_name(z: &Zone) -> &'static str {
    match z.ztype {
        ZoneType::SequentialWriteRequired => "SEQWRITE_REQ",
        ZoneType::Conventional => "CONVENTIONAL",
    }
}

/// The write pointer as a descriptor carries it: all ones when not valid (QEMU's choice).
fn reported_wp(z: &Zone) -> u64 {
    z.reported_wp().map_or(u64::MAX, |w| w.0)
}

fn report_zones(a: ReportArgs) -> Result<ExitCode> {
    let mut img = open(&a.image)?;
    let now = img.clock;
    let g = *img.device.zones().geometry();
    if a.start_lba >= g.total_lbas() {
        return Ok(nvme_error("report-zones", NvmeStatus::LbaOutOfRange));
    }
    let start = ZoneId((a.start_lba / g.zone_size) as u32);
    let max = a
        .descs
        .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let nr_zones = img.device.zones().report_count(a.state, start);
    let (c, zones) = img.device.report_zones(now, now, a.state, start, max);
    let latency = match finish(&a.image, &mut img, now, c)? {
        Ok((l, _)) => l,
        Err(s) => return Ok(nvme_error("report-zones", s)),
    };
    match a.output {
        OutputFormat::Json => {
            let list: Vec<_> = zones
                .iter()
                .map(|z| {
                    json!({
                        "slba": z.start.0,
                        "wp": reported_wp(z),
                        "cap": z.capacity,
                        "state": state_name(z),
                        "type": type_name(z),
                        "attrs": 0,
                        "attrs_info": 0,
                    })
                })
                .collect();
            let v = json!({ "nr_zones": nr_zones, "zone_list": list, "latency_ns": latency.0 });
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        OutputFormat::Normal => {
            println!("nr_zones: {nr_zones}");
            for z in &zones {
                println!(
                    "SLBA: {:<#10x} WP: {:<#10x} Cap: {:<#10x} State: {:<12} Type: {:<14} Attrs: {:#x}",
                    z.start.0,
                    reported_wp(z),
                    z.capacity,
                    state_name(z),
                    type_name(z),
                    0
                );
            }
            println!("latency: {latency}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn zone_mgmt(
    cmd: &str,
    path: &Path,
    action: ZoneAction,
    zslba: u64,
    all: bool,
) -> Result<ExitCode> {
    let mut img = open(path)?;
    let now = img.clock;
    let c = img.device.zone_mgmt(now, now, action, Lba(zslba), all);
    match finish(path, &mut img, now, c)? {
        Ok((latency, _)) => {
            println!(
                "{cmd}: Success, action:{} ({}) zone:{zslba:#x} all:{}",
                zsa_code(action),
                action_name(action),
                u8::from(all)
            );
            println!("latency: {latency}");
            Ok(ExitCode::SUCCESS)
        }
        Err(s) => Ok(nvme_error(cmd, s)),
    }
}

fn action_name(a: ZoneAction) -> &'static str {
    match a {
        ZoneAction::Open => "open",
        ZoneAction::Close => "close",
        ZoneAction::Finish => "finish",
        ZoneAction::Reset => "reset",
        ZoneAction::Offline => "offline",
    }
}

/// The data of a write or append: the file (or stdin), cut to `size` bytes, in whole blocks no
/// larger than the device's transfer limit.
fn load_data(spec: &str, size: Option<u64>, d: &ZonedDevice) -> Result<Vec<u8>> {
    let mut data = if spec == "-" {
        let mut v = Vec::new();
        std::io::stdin()
            .read_to_end(&mut v)
            .context("cannot read the data from stdin")?;
        v
    } else {
        std::fs::read(spec).with_context(|| format!("cannot read data file {spec}"))?
    };
    if let Some(n) = size {
        if n > data.len() as u64 {
            bail!(
                "--data-size is {n} bytes but {} holds only {}",
                if spec == "-" { "stdin" } else { spec },
                data.len()
            );
        }
        data.truncate(n as usize);
    }
    let lba = d.lba_size();
    if data.is_empty() {
        bail!("no data to write: give a non-empty file with --data");
    }
    let len = data.len() as u64;
    if !len.is_multiple_of(lba) {
        let up = len.div_ceil(lba) * lba;
        let fix = match len / lba * lba {
            0 => format!("pad it to {up} bytes"),
            down => format!("pad it to {up} bytes or cut it to {down}"),
        };
        bail!("the data is {len} bytes, not a multiple of the {lba}-byte LBA size; {fix}");
    }
    check_transfer(data.len() as u64 / lba, d)?;
    Ok(data)
}

/// Refuses commands larger than the device's transfer limit (like MDTS) with a clear message.
fn check_transfer(nlb: u64, d: &ZonedDevice) -> Result<()> {
    let max = d.buffer_limit();
    if nlb > max {
        bail!(
            "{nlb} blocks in one command, the device takes at most {max} ({} bytes); split the \
             I/O into several commands",
            max * d.lba_size()
        );
    }
    Ok(())
}

fn write(a: WriteArgs) -> Result<ExitCode> {
    let mut img = open(&a.image)?;
    let data = load_data(&a.data, a.data_size, &img.device)?;
    let now = img.clock;
    let c = img
        .device
        .write(now, now, Lba(a.slba), WriteData::Bytes(&data), false);
    match finish(&a.image, &mut img, now, c)? {
        Ok((latency, _)) => {
            println!("write: Success");
            println!("latency: {latency}");
            Ok(ExitCode::SUCCESS)
        }
        Err(s) => Ok(write_error("write", s, &img.device, a.slba)),
    }
}

fn zone_append(a: AppendArgs) -> Result<ExitCode> {
    let mut img = open(&a.image)?;
    let data = load_data(&a.data, a.data_size, &img.device)?;
    let now = img.clock;
    let c = img
        .device
        .write(now, now, Lba(a.zslba), WriteData::Bytes(&data), true);
    match finish(&a.image, &mut img, now, c)? {
        Ok((latency, lba)) => {
            let lba = lba.map_or(a.zslba, |l| l.0);
            println!("Success appended data to LBA {lba:#x}");
            println!("latency: {latency}");
            Ok(ExitCode::SUCCESS)
        }
        Err(s) => Ok(write_error("zone-append", s, &img.device, a.zslba)),
    }
}

fn read(a: ReadArgs) -> Result<ExitCode> {
    let nlb = match (a.nlb, a.block_count) {
        (Some(n), _) => n,
        (None, Some(c)) => c.checked_add(1).context("--block-count is too large")?,
        (None, None) => bail!("give the number of blocks with --nlb (or -c, 0's based)"),
    };
    if nlb == 0 {
        bail!("--nlb must be at least 1 (or use -c 0 for one block, as nvme-cli counts)");
    }
    let mut img = open(&a.image)?;
    check_transfer(nlb, &img.device)?;
    let now = img.clock;
    let mut out = ReadData::default();
    let c = img.device.read(now, now, Lba(a.slba), nlb, Some(&mut out));
    let latency = match finish(&a.image, &mut img, now, c)? {
        Ok((l, _)) => l,
        Err(s) => return Ok(nvme_error("read", s)),
    };
    match &a.data {
        Some(path) => {
            std::fs::write(path, &out.bytes)
                .with_context(|| format!("cannot write the data to {}", path.display()))?;
            println!("read: Success");
            println!("latency: {latency}");
        }
        None => {
            // The data goes to stdout; messages go to stderr so they do not mix with it.
            let mut so = std::io::stdout().lock();
            so.write_all(&out.bytes)?;
            so.flush()?;
            eprintln!("read: Success");
            eprintln!("latency: {latency}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn inject(a: InjectArgs) -> Result<ExitCode> {
    if !matches!(a.state, ZoneState::ReadOnly | ZoneState::Offline) {
        bail!(
            "--state {}: a media failure leaves a zone read-only or offline",
            a.state
        );
    }
    let mut img = open(&a.image)?;
    let zones = img.device.zones().geometry().zones;
    let zone = match u32::try_from(a.zone) {
        Ok(z) if z < zones => ZoneId(z),
        _ => bail!(
            "zone {} does not exist: the device has zones 0 to {}",
            a.zone,
            zones - 1
        ),
    };
    img.device
        .inject_state(zone, a.state)
        .map_err(|e| anyhow::anyhow!("cannot make zone {} {}: {e}", a.zone, a.state))?;
    image::save(&a.image, &img, true)?;
    let z = img.device.zones().zone(zone);
    println!(
        "zone {} (SLBA {:#x}) is now {} (simulated media failure)",
        a.zone,
        z.start.0,
        z.state.nvme_cli_name()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_decimal_and_hex() {
        assert_eq!(parse_num("4096"), Ok(4096));
        assert_eq!(parse_num("0x1000"), Ok(4096));
        assert_eq!(parse_num("0X1f"), Ok(31));
        assert!(parse_num("12k").unwrap_err().contains("not a number"));
        assert!(parse_num("-1").is_err());
    }

    #[test]
    fn zone_send_actions_by_name_or_code() {
        assert_eq!(parse_zsa("open"), Ok(ZoneAction::Open));
        assert_eq!(parse_zsa("Reset"), Ok(ZoneAction::Reset));
        assert_eq!(parse_zsa("0x2"), Ok(ZoneAction::Finish));
        for a in [
            ZoneAction::Open,
            ZoneAction::Close,
            ZoneAction::Finish,
            ZoneAction::Reset,
            ZoneAction::Offline,
        ] {
            assert_eq!(parse_zsa(&zsa_code(a).to_string()), Ok(a));
            assert_eq!(parse_zsa(action_name(a)), Ok(a));
        }
        assert!(parse_zsa("9").is_err());
    }
}
