//! OLTP workloads with the I/O pattern of MySQL/InnoDB: `tpcc` (tpcc-mysql) and YCSB
//! workloads a and f (`ycsb-a`, `ycsb-f`), as seed 000 (ZNS+) ran them on its file system
//! (§4, Table 3: tpcc with a 12 GB database, 1 GB buffer pool and 16 connections; YCSB with
//! 12 GB, 1 GB and 32 connections; the 16 GB file system 90% full).
//!
//! There is no SQL here: each transaction is planned as the list of 16 KiB pages its
//! statements read and change ([`tpcc`], [`ycsb`]), and an InnoDB model (`innodb.rs`) turns
//! those page accesses into file-system calls the way InnoDB 5.7 with its default settings
//! does.
//!
//! # Modelled
//! - **Files** (`/mysql`): one `.ibd` file per table (`innodb_file_per_table`; tpcc's nine
//!   tables sized in the proportions of a loaded tpcc-mysql database, YCSB's `usertable`), the
//!   system tablespace `ibdata1` (12 MiB: system pages, the doublewrite area of 2 x 64 pages,
//!   undo pages used circularly), and the redo log `ib_logfile0..` (2 x 48 MiB, InnoDB 5.7's
//!   default, for a 1 GiB pool; scaled down with smaller pools, at least 4 MiB per file, so
//!   the log keeps its share of the pool).
//!   All are created and written in full before the run (the load), then synced. The
//!   tablespaces together take `db_size`, or, with `utilization`, all files together take that
//!   share of the file system's capacity (seed 000: 90%).
//! - **Buffer pool** of `buffer_pool` bytes (default: 1 GiB, or a twelfth of the database when
//!   it is smaller than seed 000's 12 GB, at least 5 MiB) with an LRU list: a hit moves the page
//!   to the young end; a miss takes a free frame or evicts the least recently used clean page,
//!   and reads the page (`pread` of one page, `innodb_flush_method=fsync`, i.e. through the
//!   page cache; `direct` opens the data files O_DIRECT). Every page read is checked against
//!   the page's last write. A changed page is dirty and enters the flush list at the LSN of
//!   its first change; a page being written cannot be changed until the write ends (its SX
//!   latch), but can be read.
//! - **Redo log**: every change appends its redo (`redo_per_row` bytes for an update, row size
//!   plus a header for an insert, more for a page creation); a modifying transaction adds
//!   its undo records to an undo page of ibdata1 and commits with
//!   `innodb_flush_log_at_trx_commit=1`: the log is written from the last flushed block up to
//!   the current LSN (in 4 KiB blocks, rewriting the last partial block, file by file around
//!   the circular log) and fsynced before the commit returns. Concurrent committers share one
//!   write and fsync (group commit: the first becomes the leader, the others wait for it and
//!   find their LSN flushed). The checkpoint age never exceeds the log capacity: a change that
//!   would overwrite the unflushed part waits.
//! - **Page cleaner** (one thread, every `cleaner_interval`, 1 s, and on demand):
//!   LRU flushing of the dirty pages among the `lru_scan_depth` least recently used; flush-list
//!   flushing of the oldest pages in the number InnoDB 5.7's adaptive flushing recommends
//!   (`innodb_io_capacity` 200 and `_max` 2000 pages/s, `innodb_max_dirty_pages_pct` 75,
//!   the redo-age factor from 10% of the async limit, averaged with the flushing rate and the
//!   pages due in the next three intervals of redo); when the modified age passes the async
//!   limit (7/8 of 90% of the log) it flushes down to it, and user threads stop at the sync
//!   limit (15/16) until a checkpoint frees the log (`log_free_check`). Each flush batch (up
//!   to 120 pages) goes through the **doublewrite buffer**: redo made durable up to the
//!   batch's newest change (write-ahead logging), the pages written sequentially to the
//!   doublewrite area of ibdata1 in one write, fsync, then every page in place (concurrently,
//!   as asynchronous I/O), and an fsync of each tablespace written. A checkpoint (each round,
//!   at the oldest LSN still only in the pool) rewrites the header block of ib_logfile0 and
//!   fsyncs it. A user thread that finds no clean page to evict flushes the least recently
//!   used dirty page itself through one of the 8 single-page doublewrite slots (5.7's
//!   single-page flush).
//! - **Connections**: `connections` simulated threads, no think time, each transaction
//!   costing `cpu_per_statement` per SQL statement plus `cpu_per_page` per page access of
//!   host time (a sleep; the cores are not contended — the filebench workloads model no host
//!   CPU of their own either).
//!
//! # Not modelled
//! Row locks, lock waits and deadlocks; the non-leaf levels of the B-trees (taken as always
//! cached and never changed); page splits other than at the end of an index; purge, history
//! list and change buffer; the adaptive hash index; midpoint insertion in the LRU
//! (`innodb_old_blocks_pct`); neighbour flushing (`innodb_flush_neighbors`); several buffer
//! pool instances and page cleaner threads; file growth (the growing tpcc tables get 25%
//! room beyond their loaded rows and their new pages wrap around their file, as if old rows
//! had been purged, so a run of any length keeps the file system at its fill); crash recovery
//! (the doublewrite copies and redo are written, never read); the binary log; the buffer pool
//! load at startup (runs start with a cold pool: use a warm-up).
//!
//! The report counts transactions: `throughput.ops_per_sec` is transactions per second and
//! `by_op` has one entry per transaction type (`new_order`, `payment`, `order_status`,
//! `delivery`, `stock_level`; `read`, `update`, `read_modify_write`). `counters` has the
//! engine's I/O over the measured window (`page_reads`, `page_writes`, `redo_writes`,
//! `redo_fsyncs`, `doublewrite_pages`, `data_fsyncs`, `fsyncs` (both kinds), `checkpoints`,
//! `commits`, waits for I/O, log space and free pages, buffer-pool hits and misses), plus
//! `log_capacity_bytes`, `max_checkpoint_age_bytes` and the pool's state at the end; and
//! `bytes_read`/`bytes_written` are every byte the engine moved in the window, the cleaner's
//! included (the denominator of `zonelab run`'s host write amplification).

pub(crate) mod innodb;
pub mod tpcc;
pub mod ycsb;

use super::config::{
    BLOCK, RunConfig, parse_bool, parse_bytes, parse_duration, parse_f64, parse_share,
    parse_threads, parse_u64,
};
use super::content::Versions;
use super::engine::{Ctx, FsWorkloadError, FsWorkloadResult, Step};
use super::filebench::Preset;
use super::report::{FilesetReport, FsReport};
use innodb::{DbFile, EngineCfg, InnoDb, LOG_BLOCK, Txn};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use tpcc::Tpcc;
use ycsb::{Ycsb, YcsbMix, Zipf};
use zonelab_lfs::{FileSystem, Ino, IoOptions, ROOT_INO};
use zonelab_sim::{Nanos, Sim, SimRng};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// Seed 000's database and buffer pool (Table 3).
const PAPER_DB: u64 = 12 * GIB;
const PAPER_POOL: u64 = GIB;
/// InnoDB 5.7's defaults.
const DEFAULT_LOG_FILE: u64 = 48 * MIB;
const MIN_LOG_FILE: u64 = 4 * MIB;
const MIN_POOL: u64 = 5 * MIB;
const IBDATA: u64 = 12 * MIB;
const DBLWR_FIRST: u32 = 64;
const DBLWR_PAGES: u32 = 128;
const DBLWR_BATCH: u32 = 120;

/// The OLTP benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OltpBench {
    Tpcc,
    YcsbA,
    YcsbF,
}

impl OltpBench {
    pub fn parse(s: &str) -> Option<OltpBench> {
        Some(match s {
            "tpcc" => OltpBench::Tpcc,
            "ycsb-a" | "ycsba" => OltpBench::YcsbA,
            "ycsb-f" | "ycsbf" => OltpBench::YcsbF,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            OltpBench::Tpcc => "tpcc",
            OltpBench::YcsbA => "ycsb-a",
            OltpBench::YcsbF => "ycsb-f",
        }
    }
}

/// Parameters of an OLTP run (MySQL/InnoDB's option names are accepted as aliases).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OltpParams {
    pub bench: OltpBench,
    /// Client connections, one simulated thread each (16 for tpcc, 32 for YCSB).
    pub connections: u32,
    /// Bytes of the tablespaces (the database); ignored when `utilization` is set (the report
    /// gives the size used).
    pub db_size: u64,
    /// Size the files by capacity instead: all of them (tablespaces, ibdata1, redo log) take
    /// this share of the file system's statfs capacity.
    pub utilization: Option<f64>,
    /// `innodb_buffer_pool_size`; `None`: 1 GiB, or db/12 for databases under 12 GiB (at
    /// least 5 MiB).
    pub buffer_pool: Option<u64>,
    /// `innodb_page_size`: 4, 8, 16 (default), 32 or 64 KiB.
    pub page_size: u64,
    /// `innodb_log_file_size`; `None`: 48 MiB scaled by buffer_pool / 1 GiB when the pool is
    /// smaller, at least 4 MiB.
    pub log_file_size: Option<u64>,
    /// `innodb_log_files_in_group` (2).
    pub log_files: u32,
    /// `innodb_doublewrite` (on).
    pub doublewrite: bool,
    /// `innodb_flush_method=O_DIRECT` for the data files (off: `fsync`, 5.7's default).
    pub direct: bool,
    /// `innodb_io_capacity` and `innodb_io_capacity_max`, pages per second (200, 2000).
    pub io_capacity: u64,
    pub io_capacity_max: u64,
    /// `innodb_max_dirty_pages_pct` (75).
    pub max_dirty_pages_pct: f64,
    /// `innodb_lru_scan_depth` over the whole pool; `None`: an eighth of the pool (1024 per
    /// instance x 8 instances of a 1 GiB pool).
    pub lru_scan_depth: Option<u64>,
    /// Period of the page cleaner (1 s).
    pub cleaner_interval: Nanos,
    /// tpcc warehouses; `None`: as many as the database holds at tpcc's proportions (about
    /// 96 MB each, at least one; a smaller database shrinks every table alike).
    pub warehouses: Option<u32>,
    /// YCSB bytes per record (`fieldcount` x `fieldlength`: 10 x 100).
    pub record_size: u64,
    /// YCSB records; derived from the database size (reported, not settable).
    pub records: Option<u64>,
    /// YCSB's `zipfianconstant` (0.99); 0 draws keys uniformly.
    pub zipf_theta: f64,
    /// Redo bytes of a row update (page change plus the undo record's redo).
    pub redo_per_row: u64,
    /// Undo bytes per changed row.
    pub undo_per_row: u64,
    /// Host time per SQL statement and per page access.
    pub cpu_per_statement: Nanos,
    pub cpu_per_page: Nanos,
}

impl OltpParams {
    /// `bench` with seed 000's configuration at its database size.
    pub fn new(bench: OltpBench) -> OltpParams {
        OltpParams {
            bench,
            connections: if bench == OltpBench::Tpcc { 16 } else { 32 },
            db_size: PAPER_DB,
            utilization: None,
            buffer_pool: None,
            page_size: 16 * KIB,
            log_file_size: None,
            log_files: 2,
            doublewrite: true,
            direct: false,
            io_capacity: 200,
            io_capacity_max: 2000,
            max_dirty_pages_pct: 75.0,
            lru_scan_depth: None,
            cleaner_interval: Nanos::from_secs(1),
            warehouses: None,
            record_size: 1000,
            records: None,
            zipf_theta: 0.99,
            redo_per_row: 200,
            undo_per_row: 64,
            cpu_per_statement: Nanos::from_us(20),
            cpu_per_page: Nanos::from_us(1),
        }
    }

    /// `bench` with the parameters of `preset`: seed 000 sizes the database by filling 90% of
    /// the file system.
    pub fn preset(bench: OltpBench, preset: Preset) -> Result<OltpParams, String> {
        let mut p = OltpParams::new(bench);
        match preset {
            Preset::Filebench => {}
            Preset::Seed000 => p.utilization = Some(0.9),
            Preset::Seed002 => {
                return Err(format!(
                    "seed 002 (Z-LFS) ran no {}; use preset seed000",
                    bench.name()
                ));
            }
        }
        Ok(p)
    }

    /// Sets parameter `key` from text.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let pos_u64 = |v: &str| -> Result<u64, String> {
            let n = parse_u64(v)?;
            if n == 0 {
                Err(format!("{key} must be positive"))
            } else {
                Ok(n)
            }
        };
        match key {
            "connections" | "threads" | "nthreads" => self.connections = parse_threads(key, value)?,
            "db_size" | "dbsize" => {
                self.db_size = parse_bytes(value)?;
                self.utilization = None;
            }
            "utilization" => self.utilization = Some(parse_share(value)?),
            "buffer_pool" | "innodb_buffer_pool_size" => {
                self.buffer_pool = Some(parse_bytes(value)?)
            }
            "page_size" | "innodb_page_size" => self.page_size = parse_bytes(value)?,
            "log_file_size" | "innodb_log_file_size" => {
                self.log_file_size = Some(parse_bytes(value)?)
            }
            "log_files" | "innodb_log_files_in_group" => {
                self.log_files = u32::try_from(pos_u64(value)?)
                    .map_err(|_| format!("{key} {value} is too large"))?
            }
            "doublewrite" | "innodb_doublewrite" => self.doublewrite = parse_bool(value)?,
            "direct" => self.direct = parse_bool(value)?,
            "flush_method" | "innodb_flush_method" => {
                self.direct = match value.to_ascii_lowercase().as_str() {
                    "fsync" => false,
                    "o_direct" => true,
                    _ => return Err(format!("{key} '{value}': use fsync or O_DIRECT")),
                }
            }
            "io_capacity" | "innodb_io_capacity" => self.io_capacity = pos_u64(value)?,
            "io_capacity_max" | "innodb_io_capacity_max" => self.io_capacity_max = pos_u64(value)?,
            "max_dirty_pages_pct" | "innodb_max_dirty_pages_pct" => {
                let v = parse_f64(value)?;
                if !(0.0..=99.999).contains(&v) {
                    return Err(format!("{key} {v} must be in [0, 99.999]"));
                }
                self.max_dirty_pages_pct = v;
            }
            "lru_scan_depth" | "innodb_lru_scan_depth" => {
                self.lru_scan_depth = Some(pos_u64(value)?)
            }
            "cleaner_interval" => {
                let d = parse_duration(value)?;
                if d == Nanos::ZERO {
                    return Err("cleaner_interval must be positive".into());
                }
                self.cleaner_interval = d;
            }
            "warehouses" => {
                self.warehouses = Some(
                    u32::try_from(pos_u64(value)?)
                        .map_err(|_| format!("{key} {value} is too large"))?,
                )
            }
            "record_size" | "recordsize" => self.record_size = pos_u64(value)?,
            "zipf_theta" | "zipfianconstant" | "theta" => {
                let v = parse_f64(value)?;
                if !(0.0..1.0).contains(&v) {
                    return Err(format!(
                        "{key} {v} must be in [0, 1) (0: uniform keys; YCSB uses 0.99)"
                    ));
                }
                self.zipf_theta = v;
            }
            "redo_per_row" => self.redo_per_row = pos_u64(value)?,
            "undo_per_row" => self.undo_per_row = pos_u64(value)?,
            "cpu_per_statement" => self.cpu_per_statement = parse_duration(value)?,
            "cpu_per_page" => self.cpu_per_page = parse_duration(value)?,
            _ => {
                return Err(format!(
                    "unknown {} parameter '{key}' (connections, db_size, utilization, \
                     buffer_pool, page_size, log_file_size, log_files, doublewrite, direct, \
                     flush_method, io_capacity, io_capacity_max, max_dirty_pages_pct, \
                     lru_scan_depth, cleaner_interval, warehouses, record_size, zipf_theta, \
                     redo_per_row, undo_per_row, cpu_per_statement, cpu_per_page)",
                    self.bench.name()
                ));
            }
        }
        Ok(())
    }
}

fn auto_pool(db: u64) -> u64 {
    if db >= PAPER_DB {
        PAPER_POOL
    } else {
        (db / 12).max(MIN_POOL)
    }
}

fn auto_log(pool: u64) -> u64 {
    let scaled =
        (DEFAULT_LOG_FILE as u128 * pool.min(PAPER_POOL) as u128 / PAPER_POOL as u128) as u64;
    scaled.max(MIN_LOG_FILE)
}

/// The sizes a run uses, resolved against the file system's capacity.
struct Layout {
    p: OltpParams,
    ibdata_pages: u32,
    table_pages: Vec<u32>,
    log_file_size: u64,
    pool: u64,
    total: u64,
}

fn resolve(params: &OltpParams, capacity: u64) -> Result<Layout, String> {
    let mut p = params.clone();
    let page = p.page_size;
    if ![4, 8, 16, 32, 64].map(|k| k * KIB).contains(&page) {
        return Err(format!(
            "page_size {page} must be 4, 8, 16, 32 or 64 KiB (innodb_page_size)"
        ));
    }
    if p.io_capacity_max < p.io_capacity {
        return Err(format!(
            "io_capacity_max {} is below io_capacity {}",
            p.io_capacity_max, p.io_capacity
        ));
    }
    let ibdata_pages = ((IBDATA / page) as u32).max(DBLWR_FIRST + DBLWR_PAGES + 64);
    let ibdata = ibdata_pages as u64 * page;
    let round_log = |n: u64| n.div_ceil(LOG_BLOCK) * LOG_BLOCK;
    let log_of = |pool: u64| round_log(p.log_file_size.unwrap_or_else(|| auto_log(pool)));
    let db = match p.utilization {
        Some(u) => {
            let total = (u * capacity as f64) as u64;
            let db0 = total.saturating_sub(ibdata);
            let pool = p.buffer_pool.unwrap_or_else(|| auto_pool(db0));
            let logs = log_of(pool) * p.log_files as u64;
            total.checked_sub(ibdata + logs).ok_or_else(|| {
                format!(
                    "utilization {u} of {capacity} bytes leaves no room for a database beside \
                     ibdata1 ({ibdata} bytes) and the redo log ({logs} bytes)"
                )
            })?
        }
        None => p.db_size,
    };
    let db = db - db % page;
    let pool = p.buffer_pool.unwrap_or_else(|| auto_pool(db));
    let log_file_size = log_of(pool);
    if log_file_size < 16 * LOG_BLOCK {
        return Err(format!(
            "log_file_size {log_file_size} is too small: at least 64 KiB"
        ));
    }
    let pool_pages = pool / page;
    let need = 64 + 8 * p.connections as u64;
    if pool_pages < need {
        return Err(format!(
            "buffer_pool {pool} holds {pool_pages} pages of {page} bytes; {} connections need \
             at least {need}",
            p.connections
        ));
    }
    if pool_pages > u32::MAX as u64 {
        return Err(format!("buffer_pool {pool} is too large"));
    }
    let table_pages = match p.bench {
        OltpBench::Tpcc => {
            let w = p.warehouses.unwrap_or_else(|| tpcc::default_warehouses(db));
            p.warehouses = Some(w);
            tpcc::table_pages(db, page, w)?
        }
        OltpBench::YcsbA | OltpBench::YcsbF => {
            let per_page = page * 15 / 16 / (p.record_size + 100);
            if per_page == 0 {
                return Err(format!(
                    "record_size {} does not fit in a {page}-byte page",
                    p.record_size
                ));
            }
            let pages = db / page;
            if pages < 16 || pages > u32::MAX as u64 {
                return Err(format!(
                    "db_size {db} gives {pages} pages of {page} bytes: use at least 16"
                ));
            }
            p.records = Some(pages * per_page);
            vec![pages as u32]
        }
    };
    let tables: u64 = table_pages.iter().map(|&n| n as u64 * page).sum();
    let total = ibdata + log_file_size * p.log_files as u64 + tables;
    if total > capacity {
        return Err(format!(
            "the database needs {total} bytes (tablespaces {tables}, ibdata1 {ibdata}, redo log \
             {} x {log_file_size}), more than the file system's {capacity}: lower db_size or \
             size it with utilization (e.g. 0.9)",
            p.log_files
        ));
    }
    p.db_size = tables;
    p.buffer_pool = Some(pool);
    p.log_file_size = Some(log_file_size);
    p.lru_scan_depth = Some(p.lru_scan_depth.unwrap_or(pool_pages / 8).min(pool_pages));
    Ok(Layout {
        p,
        ibdata_pages,
        table_pages,
        log_file_size,
        pool,
        total,
    })
}

enum Gen {
    Tpcc(RefCell<Tpcc>),
    Ycsb(Ycsb),
}

impl Gen {
    fn next(&self, rng: &mut SimRng) -> Txn {
        match self {
            Gen::Tpcc(t) => t.borrow_mut().next(rng),
            Gen::Ycsb(y) => y.next(rng),
        }
    }
}

async fn make_file<F: FileSystem + 'static>(
    ctx: &Ctx<F>,
    dir: Ino,
    dir_path: &str,
    name: &str,
    size: u64,
    direct: bool,
) -> FsWorkloadResult<DbFile> {
    let path = format!("{dir_path}/{name}");
    let fserr = |op, err| FsWorkloadError::Fs {
        op,
        file: path.clone(),
        err,
    };
    let ino = ctx
        .fs
        .create(dir, name, 0o640, 0, 0)
        .await
        .map_err(|e| fserr("create", e))?
        .ino;
    ctx.fs.set_io_options(ino, IoOptions { direct });
    ctx.setup.borrow_mut().files_created += 1;
    let uid = ctx.new_uid();
    let versions = vec![1u32; (size / BLOCK) as usize];
    let mut off = 0;
    while off < size {
        let n = (size - off).min(MIB);
        let data = ctx.content.data(uid, off, n, Versions::PerBlock(&versions));
        let w = ctx
            .fs
            .write(ino, off, data)
            .await
            .map_err(|e| fserr("write", e))?;
        if w != n {
            return Err(FsWorkloadError::Metadata {
                file: path.clone(),
                detail: format!("write of {n} bytes at offset {off} wrote {w}"),
            });
        }
        off += n;
        ctx.setup.borrow_mut().bytes_written += n;
    }
    Ok(DbFile {
        path,
        ino,
        uid,
        versions,
    })
}

async fn mkdir<F: FileSystem + 'static>(
    ctx: &Ctx<F>,
    parent: Ino,
    name: &str,
    path: &str,
) -> FsWorkloadResult<Ino> {
    let ino = ctx
        .fs
        .mkdir(parent, name, 0o750, 0, 0)
        .await
        .map_err(|err| FsWorkloadError::Fs {
            op: "mkdir",
            file: path.to_string(),
            err,
        })?
        .ino;
    ctx.setup.borrow_mut().dirs_created += 1;
    Ok(ino)
}

/// Runs an OLTP benchmark on `fs`: creates and loads the database files, runs the
/// connections for the run length, and reports.
pub async fn run<F: FileSystem + 'static>(
    sim: Sim,
    fs: Rc<F>,
    params: OltpParams,
    cfg: RunConfig,
) -> FsWorkloadResult<FsReport> {
    if cfg.run.is_none() {
        return Err(FsWorkloadError::Config(format!(
            "{} runs for a time or a number of transactions: set run",
            params.bench.name()
        )));
    }
    let st = fs.statfs();
    let capacity = st.blocks * st.block_size;
    let lay = resolve(&params, capacity).map_err(FsWorkloadError::Config)?;
    let p = lay.p.clone();
    let page = p.page_size;
    let seed = cfg.seed;
    let ctx = Ctx::new(sim, fs, cfg);

    // The load: directories and files written in full, then a sync.
    let datadir = mkdir(&ctx, ROOT_INO, "mysql", "/mysql").await?;
    let (db_name, names): (&str, Vec<&str>) = match p.bench {
        OltpBench::Tpcc => ("tpcc", tpcc::table_names().to_vec()),
        _ => ("ycsb", vec!["usertable"]),
    };
    let db_path = format!("/mysql/{db_name}");
    let dbdir = mkdir(&ctx, datadir, db_name, &db_path).await?;
    let mut spaces = vec![
        make_file(
            &ctx,
            datadir,
            "/mysql",
            "ibdata1",
            lay.ibdata_pages as u64 * page,
            p.direct,
        )
        .await?,
    ];
    for (name, &pages) in names.iter().zip(&lay.table_pages) {
        let f = make_file(
            &ctx,
            dbdir,
            &db_path,
            &format!("{name}.ibd"),
            pages as u64 * page,
            p.direct,
        )
        .await?;
        spaces.push(f);
    }
    let mut logs = Vec::new();
    for i in 0..p.log_files {
        logs.push(
            make_file(
                &ctx,
                datadir,
                "/mysql",
                &format!("ib_logfile{i}"),
                lay.log_file_size,
                false,
            )
            .await?,
        );
    }
    ctx.fs.sync().await.map_err(|err| FsWorkloadError::Fs {
        op: "sync",
        file: "/".into(),
        err,
    })?;
    let nfiles = spaces.len() + logs.len();
    let used = {
        let st = ctx.fs.statfs();
        1.0 - st.blocks_free as f64 / st.blocks.max(1) as f64
    };
    let fileset = FilesetReport {
        files: nfiles as u64,
        dirs: 2,
        fileset_bytes: lay.total,
        preallocated_files: nfiles as u64,
        preallocated_bytes: lay.total,
        capacity_bytes: capacity,
        target_utilization: p.utilization,
        utilization: if capacity > 0 {
            lay.total as f64 / capacity as f64
        } else {
            0.0
        },
        used_after_setup: used,
    };

    let pool_pages = (lay.pool / page) as usize;
    let ecfg = EngineCfg {
        page,
        pool_pages,
        log_files: p.log_files,
        log_file_size: lay.log_file_size,
        doublewrite: p.doublewrite,
        dblwr_first: DBLWR_FIRST,
        dblwr_pages: DBLWR_PAGES,
        dblwr_batch: DBLWR_BATCH,
        undo_first: DBLWR_FIRST + DBLWR_PAGES,
        undo_pages: lay.ibdata_pages - DBLWR_FIRST - DBLWR_PAGES,
        undo_per_row: p.undo_per_row,
        commit_redo: 64,
        io_capacity: p.io_capacity,
        io_capacity_max: p.io_capacity_max,
        max_dirty_pct: p.max_dirty_pages_pct,
        lru_scan_depth: p.lru_scan_depth.unwrap_or(1) as usize,
        cleaner_interval: p.cleaner_interval,
        cpu_per_statement: p.cpu_per_statement,
        cpu_per_page: p.cpu_per_page,
    };
    let redo = p.redo_per_row.min(u32::MAX as u64 / 2) as u32;
    let mut gen_rng = SimRng::stream(seed, 3);
    let generator = Rc::new(match p.bench {
        OltpBench::Tpcc => Gen::Tpcc(RefCell::new(Tpcc::new(
            p.warehouses.unwrap_or(1),
            1,
            &lay.table_pages,
            page,
            redo,
            &mut gen_rng,
        ))),
        OltpBench::YcsbA | OltpBench::YcsbF => {
            let records = p.records.unwrap_or(1);
            Gen::Ycsb(Ycsb {
                mix: if p.bench == OltpBench::YcsbA {
                    YcsbMix::A
                } else {
                    YcsbMix::F
                },
                space: 1,
                records,
                per_page: page * 15 / 16 / (p.record_size + 100),
                zipf: (p.zipf_theta > 0.0).then(|| Zipf::new(records, p.zipf_theta)),
                redo_update: redo,
            })
        }
    });
    let db = Rc::new(InnoDb::new(ctx.clone(), ecfg, spaces, logs));

    ctx.start_measuring();
    let cleaner = ctx.sim.spawn(db.clone().page_cleaner());
    ctx.sim.spawn(db.clone().ticker());
    let (d2, g2) = (db.clone(), generator.clone());
    let result = ctx
        .run_threads(p.connections, move |t| {
            let (db, generator) = (d2.clone(), g2.clone());
            async move { connection(&db, &generator, seed, t).await }
        })
        .await;
    db.shut_down();
    ctx.notify.notify_all();
    cleaner.await;
    result?;
    if let Some(e) = ctx.take_error() {
        return Err(e);
    }

    let secs = ctx.measured_ns() as f64 / 1e9;
    let rec = ctx.recorder();
    let mut counters = ctx.counters();
    let fsyncs = ctx.counter("redo_fsyncs") + ctx.counter("data_fsyncs");
    counters.insert("fsyncs".into(), fsyncs);
    counters.insert("log_capacity_bytes".into(), db.cfg.log_capacity());
    counters.insert(
        "max_checkpoint_age_bytes".into(),
        db.max_checkpoint_age.get(),
    );
    counters.insert("buffer_pool_pages".into(), pool_pages as u64);
    let (dirty, resident) = db.pool_state();
    counters.insert("dirty_pages_at_end".into(), dirty as u64);
    counters.insert("resident_pages_at_end".into(), resident as u64);
    Ok(FsReport {
        workload: p.bench.name().to_string(),
        params: serde_json::to_value(&p).expect("parameters serialize"),
        seed,
        payload: ctx.cfg.payload,
        threads: p.connections,
        simulated_ns: ctx.measured_ns(),
        simulated_secs: secs,
        setup: ctx.setup.borrow().clone(),
        fileset,
        throughput: rec.throughput(secs),
        bytes_read: ctx.counter("bytes_read"),
        bytes_written: ctx.counter("bytes_written"),
        verify: ctx.verify_report(),
        counters,
    })
}

/// A client connection: transactions back to back.
async fn connection<F: FileSystem + 'static>(
    db: &InnoDb<F>,
    generator: &Gen,
    seed: u64,
    t: u32,
) -> Step {
    let mut rng = SimRng::stream(seed, 3000 + t as u64);
    loop {
        let start = db.ctx.begin().await?;
        let txn = generator.next(&mut rng);
        let (read, written) = db.execute(&txn).await?;
        db.ctx.end(txn.name, start, read, written);
    }
}

/// (buffer pool, log file size, all files' bytes) of `p` on `capacity` bytes.
#[cfg(test)]
pub(crate) fn resolve_for_tests(p: &OltpParams, capacity: u64) -> Result<(u64, u64, u64), String> {
    resolve(p, capacity).map(|l| (l.pool, l.log_file_size, l.total))
}
