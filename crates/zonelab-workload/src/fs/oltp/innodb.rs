//! The InnoDB storage-engine model the OLTP workloads run on: tablespaces of pages, the buffer
//! pool with its LRU and flush lists, the circular redo log with group commit, and the page
//! cleaner writing through the doublewrite buffer (what is modelled and what is not: see the
//! parent module's documentation).

use super::super::config::BLOCK;
use super::super::content::Versions;
use super::super::engine::{Ctx, FsWorkloadError, Halt, Step, fs_err};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use zonelab_device::OwnedData;
use zonelab_lfs::{FileSystem, Ino};
use zonelab_sim::Nanos;
use zonelab_sim::sync::Notify;

/// Unit of redo-log writes: InnoDB writes 512-byte log blocks and rewrites the last partial
/// one; here whole 4 KiB blocks (fingerprint payload mode moves whole blocks only), as with
/// `innodb_log_write_ahead_size` rounding.
pub(crate) const LOG_BLOCK: u64 = BLOCK;

/// A page of a tablespace: space 0 is the system tablespace `ibdata1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct PageId {
    pub space: u16,
    pub page: u32,
}

/// What a transaction does to a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Looks at the page (S latch).
    Read,
    /// Changes the page (X latch), writing `redo` bytes of redo.
    Modify,
    /// Initializes a newly allocated page without reading it (a B-tree page split at the end
    /// of an index, a fresh undo page), then changes it.
    Create,
}

/// One page access of a transaction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Step1 {
    pub page: PageId,
    pub access: Access,
    /// Redo bytes of the change (ignored for reads).
    pub redo: u32,
}

/// A transaction as the generators plan it.
#[derive(Clone, Debug)]
pub(crate) struct Txn {
    /// Operation name in the report (`new_order`, `read`, ...).
    pub name: &'static str,
    pub steps: Vec<Step1>,
    /// SQL statements, each costing `cpu_per_statement`.
    pub statements: u32,
}

/// A file of the database: a tablespace or a redo log file.
pub(crate) struct DbFile {
    pub path: String,
    pub ino: Ino,
    pub uid: u64,
    /// Version of each 4 KiB block as last written.
    pub versions: Vec<u32>,
}

/// Settings of the engine, resolved from the parameters.
#[derive(Clone, Debug)]
pub(crate) struct EngineCfg {
    pub page: u64,
    pub pool_pages: usize,
    pub log_files: u32,
    pub log_file_size: u64,
    pub doublewrite: bool,
    /// First page of the doublewrite area in ibdata1 and its length (two blocks of 64 pages).
    pub dblwr_first: u32,
    pub dblwr_pages: u32,
    /// Pages per doublewrite batch of the page cleaner (the rest are single-page slots).
    pub dblwr_batch: u32,
    /// Undo pages in ibdata1, used circularly.
    pub undo_first: u32,
    pub undo_pages: u32,
    pub undo_per_row: u64,
    pub commit_redo: u64,
    pub io_capacity: u64,
    pub io_capacity_max: u64,
    pub max_dirty_pct: f64,
    pub lru_scan_depth: usize,
    pub cleaner_interval: Nanos,
    pub cpu_per_statement: Nanos,
    pub cpu_per_page: Nanos,
}

impl EngineCfg {
    fn log_per_file(&self) -> u64 {
        self.log_file_size - LOG_BLOCK
    }

    /// Redo bytes the log holds (all files less their header blocks).
    pub fn log_capacity(&self) -> u64 {
        self.log_per_file() * self.log_files as u64
    }

    /// InnoDB's `log_calc_max_ages`: a tenth kept free, then the async and sync limits of the
    /// modified age at 7/8 and 15/16 of the rest.
    pub fn ages(&self) -> (u64, u64) {
        let margin = self.log_capacity() - self.log_capacity() / 10;
        (margin - margin / 8, margin - margin / 16)
    }
}

/// The outcome of one attempt at a page access.
enum Next {
    Done,
    /// The page is being read, or written while the access would change it.
    WaitIo,
    /// The change does not fit in the redo log before the checkpoint.
    WaitLog,
    /// No free frame and no clean page to evict.
    NeedFrame,
    /// The page was not in the pool: read it into this frame.
    Read(u32),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Io {
    None,
    Read,
    Write,
}

#[derive(Clone, Debug)]
struct Frame {
    page: PageId,
    io: Io,
    dirty: bool,
    /// LSN of the first change since the page was last clean, and of the last change.
    oldest: u64,
    newest: u64,
    tick: u64,
}

/// The buffer pool: frames, the page hash, the LRU list (all resident pages by last access),
/// the evictable subset (clean, no I/O), and the flush list (dirty pages by oldest change).
struct Pool {
    cap: usize,
    frames: Vec<Frame>,
    free: Vec<u32>,
    map: HashMap<PageId, u32>,
    lru: BTreeMap<u64, u32>,
    clean: BTreeMap<u64, u32>,
    flush: BTreeSet<(u64, u32)>,
    tick: u64,
}

impl Pool {
    fn new(cap: usize) -> Pool {
        Pool {
            cap,
            frames: Vec::new(),
            free: Vec::new(),
            map: HashMap::new(),
            lru: BTreeMap::new(),
            clean: BTreeMap::new(),
            flush: BTreeSet::new(),
            tick: 0,
        }
    }

    fn evictable(&self, f: u32) -> bool {
        let fr = &self.frames[f as usize];
        !fr.dirty && fr.io == Io::None
    }

    fn touch(&mut self, f: u32) {
        self.tick += 1;
        let t = self.tick;
        let old = std::mem::replace(&mut self.frames[f as usize].tick, t);
        self.lru.remove(&old);
        self.lru.insert(t, f);
        if self.clean.remove(&old).is_some() {
            self.clean.insert(t, f);
        }
    }

    /// A frame for a new page: a free one, or the least recently used clean page evicted.
    fn take_frame(&mut self) -> Option<u32> {
        if let Some(f) = self.free.pop() {
            return Some(f);
        }
        if self.frames.len() < self.cap {
            self.frames.push(Frame {
                page: PageId { space: 0, page: 0 },
                io: Io::None,
                dirty: false,
                oldest: 0,
                newest: 0,
                tick: 0,
            });
            return Some(self.frames.len() as u32 - 1);
        }
        let (&t, &f) = self.clean.iter().next()?;
        self.clean.remove(&t);
        self.lru.remove(&t);
        let page = self.frames[f as usize].page;
        self.map.remove(&page);
        Some(f)
    }

    fn install(&mut self, f: u32, page: PageId, io: Io) {
        self.tick += 1;
        let t = self.tick;
        self.frames[f as usize] = Frame {
            page,
            io,
            dirty: false,
            oldest: 0,
            newest: 0,
            tick: t,
        };
        self.lru.insert(t, f);
        self.map.insert(page, f);
        if io == Io::None {
            self.clean.insert(t, f);
        }
    }

    fn set_dirty(&mut self, f: u32, lsn: u64) {
        let fr = &mut self.frames[f as usize];
        fr.newest = lsn;
        if !fr.dirty {
            fr.dirty = true;
            fr.oldest = lsn;
            let t = fr.tick;
            self.flush.insert((lsn, f));
            self.clean.remove(&t);
        }
    }

    fn end_read(&mut self, f: u32) {
        self.frames[f as usize].io = Io::None;
        if self.evictable(f) {
            let t = self.frames[f as usize].tick;
            self.clean.insert(t, f);
        }
    }

    fn start_write(&mut self, f: u32) {
        self.frames[f as usize].io = Io::Write;
    }

    fn end_write(&mut self, f: u32) {
        let fr = &mut self.frames[f as usize];
        fr.io = Io::None;
        fr.dirty = false;
        let (o, t) = (fr.oldest, fr.tick);
        self.flush.remove(&(o, f));
        self.clean.insert(t, f);
    }

    fn oldest_dirty(&self) -> Option<u64> {
        self.flush.first().map(|&(l, _)| l)
    }

    /// Dirty pages with no I/O in flight, oldest change first, while `keep` holds.
    fn flushable(&self, max: usize, keep: impl Fn(u64) -> bool) -> Vec<u32> {
        self.flush
            .iter()
            .take_while(|&&(l, _)| keep(l))
            .filter(|&&(_, f)| self.frames[f as usize].io == Io::None)
            .take(max)
            .map(|&(_, f)| f)
            .collect()
    }
}

/// The redo log's state: next LSN, written-and-synced LSN, whether a group-commit leader is
/// writing, the last checkpoint.
#[derive(Default)]
struct LogState {
    lsn: u64,
    flushed: u64,
    flushing: bool,
    checkpoint: u64,
    /// A user thread waits for the checkpoint age to fall (log nearly full).
    sync_wanted: bool,
    /// A user thread found no clean page to evict.
    lru_wanted: bool,
}

/// The page cleaner's running averages (InnoDB's `page_cleaner_flush_pages_recommendation`).
#[derive(Default)]
struct CleanerState {
    last_tick: Nanos,
    last_lsn: u64,
    lsn_rate: f64,
    page_rate: f64,
    flushed_since: u64,
}

/// The engine: files, buffer pool, redo log, page cleaner.
pub(crate) struct InnoDb<F> {
    pub ctx: Rc<Ctx<F>>,
    pub cfg: EngineCfg,
    /// Tablespaces; 0 is ibdata1.
    pub spaces: RefCell<Vec<DbFile>>,
    pub logs: RefCell<Vec<DbFile>>,
    pool: RefCell<Pool>,
    log: RefCell<LogState>,
    cleaner: RefCell<CleanerState>,
    cleaner_wake: Notify,
    tick_pending: Cell<bool>,
    pub done: Cell<bool>,
    undo_cursor: Cell<u64>,
    single_slot: Cell<u32>,
    /// Largest checkpoint age seen (checked against the log capacity by the tests).
    pub max_checkpoint_age: Cell<u64>,
}

fn short(path: &str, what: &str, off: u64, want: u64, got: u64) -> Halt {
    Halt::Error(FsWorkloadError::Metadata {
        file: path.to_string(),
        detail: format!("{what} of {want} bytes at offset {off} moved {got}"),
    })
}

impl<F: FileSystem + 'static> InnoDb<F> {
    pub fn new(
        ctx: Rc<Ctx<F>>,
        cfg: EngineCfg,
        spaces: Vec<DbFile>,
        logs: Vec<DbFile>,
    ) -> InnoDb<F> {
        InnoDb {
            ctx,
            pool: RefCell::new(Pool::new(cfg.pool_pages)),
            cfg,
            spaces: RefCell::new(spaces),
            logs: RefCell::new(logs),
            log: RefCell::new(LogState::default()),
            cleaner: RefCell::new(CleanerState::default()),
            cleaner_wake: Notify::new(),
            tick_pending: Cell::new(false),
            done: Cell::new(false),
            undo_cursor: Cell::new(0),
            single_slot: Cell::new(0),
            max_checkpoint_age: Cell::new(0),
        }
    }

    fn count(&self, c: &str, n: u64) {
        self.ctx.add_measured(c, n);
    }

    async fn wait(&self) -> Step {
        self.ctx.notify.notified().await;
        if self.ctx.stopped() {
            return Err(Halt::Done);
        }
        Ok(())
    }

    fn wake_cleaner(&self) {
        self.cleaner_wake.notify_one();
    }

    /// Current LSN, flushed LSN and checkpoint LSN.
    pub fn lsns(&self) -> (u64, u64, u64) {
        let l = self.log.borrow();
        (l.lsn, l.flushed, l.checkpoint)
    }

    /// Dirty pages in the pool and pages resident.
    pub fn pool_state(&self) -> (usize, usize) {
        let p = self.pool.borrow();
        (p.flush.len(), p.map.len())
    }

    /// Appends `n` redo bytes if the log has room (the checkpoint age stays within the log's
    /// capacity); returns the new LSN.
    fn try_append(&self, n: u64) -> Option<u64> {
        let mut l = self.log.borrow_mut();
        if l.lsn + n - l.checkpoint > self.cfg.log_capacity() {
            l.sync_wanted = true;
            return None;
        }
        l.lsn += n;
        let age = l.lsn - l.checkpoint;
        if age > self.max_checkpoint_age.get() {
            self.max_checkpoint_age.set(age);
        }
        self.count("redo_bytes_generated", n);
        Some(l.lsn)
    }

    async fn wait_log_space(&self) -> Step {
        self.count("log_full_waits", 1);
        self.wake_cleaner();
        self.wait().await
    }

    /// InnoDB's `log_free_check` at the start of a transaction: when the checkpoint age is
    /// past the sync limit the thread asks for a flush and waits for the checkpoint.
    pub async fn log_free_check(&self) -> Step {
        let (_, sync) = self.cfg.ages();
        let mut waited = false;
        loop {
            {
                let mut l = self.log.borrow_mut();
                if l.lsn - l.checkpoint <= sync {
                    return Ok(());
                }
                l.sync_wanted = true;
            }
            if !waited {
                self.count("sync_flush_waits", 1);
                waited = true;
            }
            self.wake_cleaner();
            self.wait().await?;
        }
    }

    /// Accesses `page`: a hit touches it in the LRU; a miss takes a free or evicted frame and
    /// reads the page (checking its data); a change appends redo and makes the page dirty.
    /// Returns the bytes read.
    pub async fn access(&self, st: Step1) -> Step<u64> {
        let mut read = 0;
        loop {
            if self.ctx.stopped() {
                return Err(Halt::Done);
            }
            match self.try_access(st, read == 0) {
                Next::Done => return Ok(read),
                Next::WaitIo => {
                    self.count("page_io_waits", 1);
                    self.wait().await?;
                }
                Next::WaitLog => self.wait_log_space().await?,
                Next::NeedFrame => self.free_a_page().await?,
                Next::Read(f) => {
                    self.count("buffer_pool_misses", 1);
                    read += self.read_page(st.page).await?;
                    self.pool.borrow_mut().end_read(f);
                    self.ctx.notify.notify_all();
                }
            }
        }
    }

    /// What [`InnoDb::access`] can do without waiting, done; or what it must wait for.
    fn try_access(&self, st: Step1, count_hit: bool) -> Next {
        let mut bp = self.pool.borrow_mut();
        if let Some(&f) = bp.map.get(&st.page) {
            let io = bp.frames[f as usize].io;
            if io == Io::Read || (io == Io::Write && st.access != Access::Read) {
                return Next::WaitIo;
            }
            if st.access != Access::Read {
                let Some(lsn) = self.try_append(st.redo as u64) else {
                    return Next::WaitLog;
                };
                bp.set_dirty(f, lsn);
            }
            bp.touch(f);
            if count_hit {
                self.count("buffer_pool_hits", 1);
            }
            return Next::Done;
        }
        let Some(f) = bp.take_frame() else {
            return Next::NeedFrame;
        };
        if st.access == Access::Create {
            let Some(lsn) = self.try_append(st.redo as u64) else {
                bp.free.push(f);
                return Next::WaitLog;
            };
            bp.install(f, st.page, Io::None);
            bp.set_dirty(f, lsn);
            self.count("pages_created", 1);
            return Next::Done;
        }
        bp.install(f, st.page, Io::Read);
        Next::Read(f)
    }

    async fn read_page(&self, page: PageId) -> Step<u64> {
        let p = self.cfg.page;
        let off = page.page as u64 * p;
        let (ino, path) = {
            let s = &self.spaces.borrow()[page.space as usize];
            (s.ino, s.path.clone())
        };
        let got = self
            .ctx
            .fs
            .read(ino, off, p)
            .await
            .map_err(|e| fs_err("read", path.clone(), e))?;
        let n = self.ctx.content.len_of(&got);
        if n != p {
            return Err(short(&path, "read", off, p, n));
        }
        {
            let spaces = self.spaces.borrow();
            let s = &spaces[page.space as usize];
            self.ctx.check_read(
                &|| path.clone(),
                s.uid,
                off,
                &got,
                Versions::PerBlock(&s.versions),
            )?;
        }
        self.count("page_reads", 1);
        self.count("bytes_read", p);
        Ok(p)
    }

    /// No clean page to evict: the thread flushes the least recently used dirty page itself
    /// through a single-page doublewrite slot (InnoDB 5.7's `buf_flush_single_page_from_LRU`),
    /// or waits when every page has I/O in flight.
    async fn free_a_page(&self) -> Step {
        self.log.borrow_mut().lru_wanted = true;
        self.wake_cleaner();
        let victim = {
            let mut bp = self.pool.borrow_mut();
            let v = bp
                .lru
                .values()
                .copied()
                .find(|&f| bp.frames[f as usize].io == Io::None && bp.frames[f as usize].dirty);
            if let Some(f) = v {
                bp.start_write(f);
            }
            v
        };
        match victim {
            Some(f) => {
                self.count("single_page_flushes", 1);
                self.write_pages(vec![f], true).await?;
                Ok(())
            }
            None => {
                self.count("free_page_waits", 1);
                self.wait().await
            }
        }
    }

    /// Makes the redo log durable up to `target`: one thread at a time writes everything
    /// appended so far and fsyncs (group commit); the others wait for it. Returns the bytes
    /// this thread wrote.
    pub async fn log_flush_up_to(&self, target: u64) -> Step<u64> {
        let mut wrote = 0;
        loop {
            if self.ctx.stopped() {
                return Err(Halt::Done);
            }
            let (from, to) = {
                let mut l = self.log.borrow_mut();
                if l.flushed >= target {
                    return Ok(wrote);
                }
                if l.flushing {
                    (0, 0)
                } else {
                    l.flushing = true;
                    (l.flushed, l.lsn)
                }
            };
            if to == 0 {
                self.wait().await?;
                continue;
            }
            wrote += self.write_log(from, to).await?;
            {
                let mut l = self.log.borrow_mut();
                l.flushed = to;
                l.flushing = false;
            }
            self.ctx.notify.notify_all();
        }
    }

    /// Writes the log blocks holding LSNs `from..to` (the first one again if it was partial),
    /// file by file in the circular log, then fsyncs the files written.
    async fn write_log(&self, from: u64, to: u64) -> Step<u64> {
        let per = self.cfg.log_per_file();
        let cap = self.cfg.log_capacity();
        let start = from - from % LOG_BLOCK;
        let end = to.div_ceil(LOG_BLOCK) * LOG_BLOCK;
        let mut cur = start;
        let mut files = Vec::new();
        let mut bytes = 0;
        while cur < end {
            let p = cur % cap;
            let file = (p / per) as usize;
            let within = p % per;
            let len = (end - cur).min(per - within);
            let off = LOG_BLOCK + within;
            let (ino, path, data) = self.next_data(&self.logs, file, off, len);
            let w = self
                .ctx
                .fs
                .write(ino, off, data)
                .await
                .map_err(|e| fs_err("write", path.clone(), e))?;
            if w != len {
                return Err(short(&path, "write", off, len, w));
            }
            if !files.contains(&file) {
                files.push(file);
            }
            self.count("redo_writes", 1);
            bytes += len;
            cur += len;
        }
        self.count("redo_bytes_written", bytes);
        self.count("bytes_written", bytes);
        for file in files {
            let (ino, path) = {
                let l = &self.logs.borrow()[file];
                (l.ino, l.path.clone())
            };
            self.ctx
                .fs
                .fsync(ino, false)
                .await
                .map_err(|e| fs_err("fsync", path, e))?;
            self.count("redo_fsyncs", 1);
        }
        Ok(bytes)
    }

    /// Bumps the versions of `len` bytes at `off` of file `i` and returns the data to write.
    fn next_data(
        &self,
        files: &RefCell<Vec<DbFile>>,
        i: usize,
        off: u64,
        len: u64,
    ) -> (Ino, String, OwnedData) {
        let mut fs = files.borrow_mut();
        let f = &mut fs[i];
        let first = (off / BLOCK) as usize;
        for v in &mut f.versions[first..first + (len / BLOCK) as usize] {
            *v += 1;
        }
        let data = self
            .ctx
            .content
            .data(f.uid, off, len, Versions::PerBlock(&f.versions));
        (f.ino, f.path.clone(), data)
    }

    /// Writes pages already marked as being written: redo first up to their newest change
    /// (write-ahead logging), then the doublewrite copy (one sequential write to ibdata1 and
    /// an fsync), then every page in place (concurrently, as InnoDB's asynchronous I/O) and an
    /// fsync of each tablespace written. The pages are clean afterwards.
    async fn write_pages(&self, frames: Vec<u32>, single: bool) -> Step {
        let (pages, newest) = {
            let bp = self.pool.borrow();
            let pages: Vec<PageId> = frames.iter().map(|&f| bp.frames[f as usize].page).collect();
            let newest = frames
                .iter()
                .map(|&f| bp.frames[f as usize].newest)
                .max()
                .unwrap_or(0);
            (pages, newest)
        };
        self.log_flush_up_to(newest).await?;
        let p = self.cfg.page;
        let n = pages.len() as u64;
        if self.cfg.doublewrite {
            let slot = if single {
                let singles = self.cfg.dblwr_pages - self.cfg.dblwr_batch;
                let s = self.single_slot.get();
                self.single_slot.set(s + 1);
                self.cfg.dblwr_first + self.cfg.dblwr_batch + s % singles
            } else {
                self.cfg.dblwr_first
            };
            let off = slot as u64 * p;
            let (ino, path, data) = self.next_data(&self.spaces, 0, off, n * p);
            let w = self
                .ctx
                .fs
                .write(ino, off, data)
                .await
                .map_err(|e| fs_err("write", path.clone(), e))?;
            if w != n * p {
                return Err(short(&path, "write", off, n * p, w));
            }
            self.ctx
                .fs
                .fsync(ino, false)
                .await
                .map_err(|e| fs_err("fsync", path, e))?;
            self.count("doublewrite_writes", 1);
            self.count("doublewrite_pages", n);
            self.count("data_fsyncs", 1);
            self.count("bytes_written", n * p);
        }
        let mut handles = Vec::with_capacity(pages.len());
        for pg in &pages {
            let off = pg.page as u64 * p;
            let (ino, path, data) = self.next_data(&self.spaces, pg.space as usize, off, p);
            let fs = self.ctx.fs.clone();
            handles.push((
                path,
                off,
                self.ctx
                    .sim
                    .spawn(async move { fs.write(ino, off, data).await }),
            ));
        }
        let mut first_err = None;
        for (path, off, h) in handles {
            match h.await {
                Ok(w) if w == p => {}
                Ok(w) => {
                    first_err.get_or_insert(short(&path, "write", off, p, w));
                }
                Err(e) => {
                    first_err.get_or_insert(fs_err("write", path, e));
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        let mut spaces: Vec<u16> = pages.iter().map(|pg| pg.space).collect();
        spaces.sort_unstable();
        spaces.dedup();
        for sp in spaces {
            let (ino, path) = {
                let s = &self.spaces.borrow()[sp as usize];
                (s.ino, s.path.clone())
            };
            self.ctx
                .fs
                .fsync(ino, false)
                .await
                .map_err(|e| fs_err("fsync", path, e))?;
            self.count("data_fsyncs", 1);
        }
        {
            let mut bp = self.pool.borrow_mut();
            for &f in &frames {
                bp.end_write(f);
            }
        }
        self.cleaner.borrow_mut().flushed_since += n;
        self.count("page_writes", n);
        self.count("bytes_written", n * p);
        self.ctx.notify.notify_all();
        Ok(())
    }

    /// Marks up to a doublewrite batch of `pick`ed pages as being written and writes them;
    /// returns how many were written.
    async fn flush_batch(&self, pick: impl Fn(&Pool, usize) -> Vec<u32>) -> Step<usize> {
        let frames = {
            let mut bp = self.pool.borrow_mut();
            let v = pick(&bp, self.cfg.dblwr_batch as usize);
            for &f in &v {
                bp.start_write(f);
            }
            v
        };
        let n = frames.len();
        if n > 0 {
            self.count("flush_batches", 1);
            self.write_pages(frames, false).await?;
        }
        Ok(n)
    }

    /// Allocates `bytes` of undo log in the circular undo area of ibdata1 and returns the
    /// access to the undo page holding them (a fresh page when the allocation starts one).
    pub fn undo_step(&self, bytes: u64) -> Step1 {
        let p = self.cfg.page;
        let c = self.undo_cursor.get();
        let first_page = c / p;
        let next = c + bytes;
        self.undo_cursor.set(next);
        let last_page = (next - 1) / p;
        let access = if last_page != first_page || c.is_multiple_of(p) {
            Access::Create
        } else {
            Access::Modify
        };
        Step1 {
            page: PageId {
                space: 0,
                page: self.cfg.undo_first + (last_page % self.cfg.undo_pages as u64) as u32,
            },
            access,
            redo: bytes as u32,
        }
    }

    /// Runs one planned transaction; returns (bytes read, bytes written by this thread).
    pub async fn execute(&self, txn: &Txn) -> Step<(u64, u64)> {
        if txn.steps.iter().any(|s| s.access != Access::Read) {
            self.log_free_check().await?;
        }
        let cpu = self.cfg.cpu_per_statement.0 * txn.statements as u64
            + self.cfg.cpu_per_page.0 * txn.steps.len() as u64;
        if cpu > 0 {
            self.ctx.sim.sleep(Nanos(cpu)).await;
        }
        let mut read = 0;
        let mut changed = 0u64;
        for st in &txn.steps {
            read += self.access(*st).await?;
            if st.access != Access::Read {
                changed += 1;
            }
        }
        if changed == 0 {
            return Ok((read, 0));
        }
        // Undo records of the changed rows and the commit mark, in one undo page.
        let undo = self.undo_step(self.cfg.undo_per_row * changed + self.cfg.commit_redo);
        read += self.access(undo).await?;
        let commit_lsn = self.lsns().0;
        let wrote = self.log_flush_up_to(commit_lsn).await?;
        self.count("commits", 1);
        Ok((read, wrote))
    }

    /// The page cleaner thread: wakes each `cleaner_interval` and whenever a user thread asks
    /// (log nearly full, no clean page to evict), until the run is over.
    pub async fn page_cleaner(self: Rc<Self>) {
        self.cleaner.borrow_mut().last_tick = self.ctx.sim.now();
        loop {
            self.cleaner_wake.notified().await;
            if self.done.get() || self.ctx.stopped() {
                return;
            }
            let tick = self.tick_pending.replace(false);
            match self.clean_once(tick).await {
                Ok(()) => {}
                Err(Halt::Done) => return,
                Err(Halt::Error(e)) => {
                    self.ctx.fail(e);
                    return;
                }
            }
        }
    }

    /// Wakes the page cleaner every `cleaner_interval` until the run is over.
    pub async fn ticker(self: Rc<Self>) {
        loop {
            self.ctx.sim.sleep(self.cfg.cleaner_interval).await;
            if self.done.get() || self.ctx.stopped() {
                return;
            }
            self.tick_pending.set(true);
            self.wake_cleaner();
        }
    }

    /// Ends the page cleaner (after the user threads are done).
    pub fn shut_down(&self) {
        self.done.set(true);
        self.wake_cleaner();
    }

    /// One round of the page cleaner.
    async fn clean_once(&self, tick: bool) -> Step {
        if tick {
            self.count("cleaner_rounds", 1);
        }
        let (async_age, sync_age) = self.cfg.ages();
        let (sync, lru) = {
            let mut l = self.log.borrow_mut();
            (
                std::mem::take(&mut l.sync_wanted),
                std::mem::take(&mut l.lru_wanted),
            )
        };
        // LRU flush: the dirty pages among the `lru_scan_depth` least recently used, so
        // that user threads find clean pages to evict.
        if tick || lru {
            let depth = self.cfg.lru_scan_depth;
            loop {
                if self.done.get() {
                    return Ok(());
                }
                let n = self
                    .flush_batch(|bp, max| {
                        bp.lru
                            .values()
                            .take(depth)
                            .copied()
                            .filter(|&f| {
                                let fr = &bp.frames[f as usize];
                                fr.dirty && fr.io == Io::None
                            })
                            .take(max)
                            .collect()
                    })
                    .await?;
                self.count("lru_flush_pages", n as u64);
                if n < self.cfg.dblwr_batch as usize {
                    break;
                }
            }
        }
        // Flush-list flush: adaptive on the periodic round; down to the async limit of the
        // modified age when the log is nearly full.
        let mut quota = if tick { self.adaptive_quota() } else { 0 };
        while quota > 0 {
            if self.done.get() {
                return Ok(());
            }
            let max = quota.min(self.cfg.dblwr_batch as usize);
            let n = self
                .flush_batch(|bp, b| bp.flushable(b.min(max), |_| true))
                .await?;
            self.count("flush_list_pages", n as u64);
            if n == 0 {
                break;
            }
            quota -= n;
        }
        let modified_age = {
            let lsn = self.lsns().0;
            lsn - self.pool.borrow().oldest_dirty().unwrap_or(lsn)
        };
        let sync_flush = sync || modified_age > async_age;
        if sync_flush {
            self.count("sync_flush_rounds", 1);
            loop {
                if self.done.get() {
                    return Ok(());
                }
                let target = self.lsns().0.saturating_sub(async_age);
                let n = self
                    .flush_batch(|bp, b| bp.flushable(b, |l| l <= target))
                    .await?;
                self.count("flush_list_pages", n as u64);
                if n == 0 {
                    let waiting = {
                        let bp = self.pool.borrow();
                        bp.oldest_dirty().is_some_and(|o| o <= target)
                    };
                    if !waiting {
                        break;
                    }
                    // The oldest pages are being written by user threads: wait for them.
                    self.wait().await?;
                }
            }
        }
        let ckpt_age = {
            let l = self.log.borrow();
            l.lsn - l.checkpoint
        };
        if tick || sync_flush || ckpt_age > sync_age {
            self.checkpoint().await?;
        }
        Ok(())
    }

    /// Pages to flush this round: InnoDB 5.7's recommendation, the mean of the I/O capacity
    /// share for the dirty-page and redo-age pressures, the average flushing rate, and the
    /// dirty pages whose oldest change falls in the next three intervals' worth of redo;
    /// at most `io_capacity_max` per second.
    fn adaptive_quota(&self) -> usize {
        let now = self.ctx.sim.now();
        let (lsn, _, _) = self.lsns();
        let (async_age, _) = self.cfg.ages();
        let bp = self.pool.borrow();
        let mut c = self.cleaner.borrow_mut();
        let secs = (now.0.saturating_sub(c.last_tick.0) as f64 / 1e9).max(1e-3);
        c.last_tick = now;
        c.lsn_rate = (c.lsn_rate + (lsn - c.last_lsn) as f64 / secs) / 2.0;
        c.last_lsn = lsn;
        c.page_rate = (c.page_rate + std::mem::take(&mut c.flushed_since) as f64 / secs) / 2.0;
        let dirty_pct = bp.flush.len() as f64 * 100.0 / self.cfg.pool_pages as f64;
        let pct_dirty: f64 = if dirty_pct >= self.cfg.max_dirty_pct {
            100.0
        } else {
            0.0
        };
        let oldest = bp.oldest_dirty().unwrap_or(lsn);
        let age = lsn - oldest;
        let pct_lsn = if age < async_age / 10 {
            0.0
        } else {
            let f = age as f64 * 100.0 / async_age as f64;
            self.cfg.io_capacity_max as f64 / self.cfg.io_capacity as f64 * f * f.sqrt() / 7.5
        };
        let pct = pct_dirty.max(pct_lsn);
        let interval = self.cfg.cleaner_interval.as_secs_f64();
        let cap_max = (self.cfg.io_capacity_max as f64 * interval).max(1.0);
        let target = oldest + (c.lsn_rate * 3.0 * interval) as u64;
        let for_lsn = bp
            .flush
            .iter()
            .take_while(|&&(l, _)| l <= target)
            .take(cap_max as usize)
            .count() as f64;
        let n = (self.cfg.io_capacity as f64 * pct / 100.0 * interval
            + c.page_rate * interval
            + for_lsn)
            / 3.0;
        n.min(cap_max) as usize
    }

    /// Writes a checkpoint at the oldest change still only in the pool: redo durable up to
    /// it, the checkpoint block of ib_logfile0 rewritten, fsync.
    async fn checkpoint(&self) -> Step {
        let cp = {
            let lsn = self.lsns().0;
            self.pool.borrow().oldest_dirty().unwrap_or(lsn).min(lsn)
        };
        if cp <= self.lsns().2 {
            return Ok(());
        }
        self.log_flush_up_to(cp).await?;
        let (ino, path, data) = self.next_data(&self.logs, 0, 0, LOG_BLOCK);
        let w = self
            .ctx
            .fs
            .write(ino, 0, data)
            .await
            .map_err(|e| fs_err("write", path.clone(), e))?;
        if w != LOG_BLOCK {
            return Err(short(&path, "write", 0, LOG_BLOCK, w));
        }
        self.ctx
            .fs
            .fsync(ino, false)
            .await
            .map_err(|e| fs_err("fsync", path, e))?;
        {
            let mut l = self.log.borrow_mut();
            l.checkpoint = l.checkpoint.max(cp);
        }
        self.count("checkpoints", 1);
        self.count("redo_fsyncs", 1);
        self.count("bytes_written", LOG_BLOCK);
        self.ctx.notify.notify_all();
        Ok(())
    }
}
