//! The flash array: per-die and per-channel timelines, block state, wear and counters.
//!
//! Model invariants are assertions (an impossible state stops the run): pages of a block are
//! programmed in order, only after the block was erased. Block state is allocated per plane on
//! first touch, so an untouched multi-terabyte device costs almost nothing.
//!
//! Operations are planned when they are asked for, possibly ahead of the die's present work.
//! Reads, copybacks, erases and the programs of the device's own copies take the first idle span
//! of their die that fits ([`Timeline`]); a host program follows everything reserved on its die.
//! NAND orders the operations of one block in time too (page after page, after the erase), so
//! each also waits for its block's previous operation to end ([`BlockState::ready`]).

use crate::{DieId, FlashTiming, Geometry, Timeline};
use serde::{Deserialize, Serialize};
use zonelab_sim::{Divisor, Nanos};

/// A block: die, plane within the die, block within the plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BlockAddr {
    pub die: DieId,
    pub plane: u32,
    pub block: u32,
}

/// A page of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PageAddr {
    pub block: BlockAddr,
    pub page: u32,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct BlockState {
    erase_count: u32,
    /// Next page to program; `pages_per_block` when full.
    next_page: u32,
    /// When the block's last planned program, copyback or erase ends: its next one starts no
    /// earlier. Timing only, so not stored in images; a loaded array takes the end of each
    /// die's reservations instead (the order of its blocks' operations before the save is not
    /// known).
    #[serde(skip)]
    ready: Nanos,
}

/// Operation counters of the whole array.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlashCounters {
    pub reads: u64,
    pub programs: u64,
    pub erases: u64,
    pub copybacks: u64,
}

/// Width of the buckets of [`FlashArray::die_busy_log`].
pub const BUSY_BUCKET: Nanos = Nanos(10_000_000);

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(try_from = "FlashArrayFields")]
pub struct FlashArray {
    geometry: Geometry,
    timing: FlashTiming,
    dies: Vec<Timeline>,
    channels: Vec<Timeline>,
    /// Per (die, plane): block states, allocated on first touch. Blocks start erased.
    blocks: Vec<Option<Vec<BlockState>>>,
    counters: FlashCounters,
    /// Die time reserved per [`BUSY_BUCKET`] of simulated time, summed over dies. A statistic
    /// of this process's run, so not serialized.
    #[serde(skip)]
    busy_log: Vec<u64>,
    /// The last partial-page read size and its channel time (which takes a division); reads
    /// mostly repeat one size. A cache, so not serialized.
    #[serde(skip)]
    last_transfer: Option<(u64, Nanos)>,
    /// `geometry.channels` as a divisor (die to channel). Derived, so not serialized.
    #[serde(skip)]
    channel_div: Divisor,
}

/// The serialized fields of a [`FlashArray`], in order.
#[derive(Deserialize)]
struct FlashArrayFields {
    geometry: Geometry,
    timing: FlashTiming,
    dies: Vec<Timeline>,
    channels: Vec<Timeline>,
    blocks: Vec<Option<Vec<BlockState>>>,
    counters: FlashCounters,
}

impl TryFrom<FlashArrayFields> for FlashArray {
    type Error = String;
    fn try_from(f: FlashArrayFields) -> Result<FlashArray, String> {
        if f.geometry.channels == 0 {
            return Err("flash array without channels".into());
        }
        let mut blocks = f.blocks;
        let planes = f.geometry.planes_per_die.max(1) as usize;
        for (i, plane) in blocks.iter_mut().enumerate() {
            let die_free = f
                .dies
                .get(i / planes)
                .map_or(Nanos::ZERO, |d| d.free_after(Nanos::ZERO));
            for b in plane.iter_mut().flatten() {
                b.ready = die_free;
            }
        }
        Ok(FlashArray {
            channel_div: Divisor::new(f.geometry.channels as u64),
            geometry: f.geometry,
            timing: f.timing,
            dies: f.dies,
            channels: f.channels,
            blocks,
            counters: f.counters,
            busy_log: Vec::new(),
            last_transfer: None,
        })
    }
}

impl FlashArray {
    pub fn new(geometry: Geometry, timing: FlashTiming) -> FlashArray {
        let dies = geometry.total_dies() as usize;
        let planes = dies * geometry.planes_per_die as usize;
        FlashArray {
            dies: vec![Timeline::new(); dies],
            channels: vec![Timeline::new(); geometry.channels as usize],
            blocks: vec![None; planes],
            channel_div: Divisor::new(geometry.channels as u64),
            geometry,
            timing,
            counters: FlashCounters::default(),
            busy_log: Vec::new(),
            last_transfer: None,
        }
    }

    /// The channel of a die (as [`Geometry::channel_of`]).
    #[inline]
    fn channel_of(&self, die: DieId) -> usize {
        self.channel_div.remainder(die.0 as u64) as usize
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }
    /// Sets the modes of `t` device images do not store ([`FlashTiming::read_holds_die`],
    /// [`FlashTiming::cache_program`]); their owner restores them from its profile.
    pub fn set_modes_from(&mut self, t: &FlashTiming) {
        self.timing.read_holds_die = t.read_holds_die;
        self.timing.cache_program = t.cache_program;
    }

    pub fn timing(&self) -> &FlashTiming {
        &self.timing
    }
    pub fn counters(&self) -> FlashCounters {
        self.counters
    }

    /// Die time spent on flash operations in each [`BUSY_BUCKET`] of simulated time (bucket
    /// `i` covers `[i, i+1) * BUSY_BUCKET`), summed over dies: divided by the number of dies
    /// and the bucket length it is the chips' utilization (seed 000 Figs. 9, 10). Time planned
    /// and then aborted by a power cut stays counted.
    pub fn die_busy_log(&self) -> &[u64] {
        &self.busy_log
    }

    /// Reserves `d` of die `die` from `at` on; returns the start and logs the busy time.
    #[inline]
    fn reserve_die(&mut self, now: Nanos, die: usize, at: Nanos, d: Nanos) -> Nanos {
        let start = self.dies[die].reserve(now, at, d);
        self.log_busy(start, d);
        start
    }

    #[inline]
    fn log_busy(&mut self, start: Nanos, d: Nanos) {
        let (mut t, end) = (start.0, start.0 + d.0);
        while t < end {
            let b = (t / BUSY_BUCKET.0) as usize;
            let b_end = (b as u64 + 1) * BUSY_BUCKET.0;
            if b >= self.busy_log.len() {
                self.busy_log.resize(b + 1, 0);
            }
            let upto = end.min(b_end);
            self.busy_log[b] += upto - t;
            t = upto;
        }
    }

    fn state(&mut self, b: BlockAddr) -> &mut BlockState {
        let g = &self.geometry;
        assert!(
            b.die.0 < g.total_dies() && b.plane < g.planes_per_die && b.block < g.blocks_per_plane,
            "flash address out of the array: {b:?}"
        );
        let idx = b.die.0 as usize * g.planes_per_die as usize + b.plane as usize;
        let n = g.blocks_per_plane as usize;
        &mut self.blocks[idx].get_or_insert_with(|| vec![BlockState::default(); n])
            [b.block as usize]
    }

    /// Erase count of a block.
    pub fn erase_count(&self, b: BlockAddr) -> u32 {
        let g = &self.geometry;
        let idx = b.die.0 as usize * g.planes_per_die as usize + b.plane as usize;
        self.blocks
            .get(idx)
            .and_then(|p| p.as_ref())
            .map_or(0, |p| p[b.block as usize].erase_count)
    }

    /// Pages programmed in a block since its last erase.
    pub fn programmed_pages(&self, b: BlockAddr) -> u32 {
        let g = &self.geometry;
        let idx = b.die.0 as usize * g.planes_per_die as usize + b.plane as usize;
        self.blocks
            .get(idx)
            .and_then(|p| p.as_ref())
            .map_or(0, |p| p[b.block as usize].next_page)
    }

    /// Erase counts summed over all blocks, and the largest one.
    pub fn wear_summary(&self) -> (u64, u32) {
        let mut total = 0u64;
        let mut max = 0u32;
        for s in self.blocks.iter().flatten().flatten() {
            total += s.erase_count as u64;
            max = max.max(s.erase_count);
        }
        (total, max)
    }

    /// Checks that `p` is its block's next page to program and counts it programmed; returns
    /// when the block's previous operation ends.
    fn check_program(&mut self, p: PageAddr) -> Nanos {
        let ppb = self.geometry.pages_per_block;
        let st = self.state(p.block);
        assert!(
            p.page == st.next_page && p.page < ppb,
            "flash invariant broken: program of page {} of {:?}, but the next programmable page is {} \
             (pages must be programmed in order, after erase)",
            p.page,
            p.block,
            st.next_page
        );
        st.next_page += 1;
        st.ready
    }

    /// Notes when the last planned operation of block `b` ends.
    fn set_ready(&mut self, b: BlockAddr, end: Nanos) {
        let st = self.state(b);
        st.ready = st.ready.max(end);
    }

    /// Programs one page whose data is in the controller: channel transfer, then tPROG on the
    /// die, after everything reserved on the die (so after the block's previous operation).
    /// Returns when the program completes.
    ///
    /// Host writes program this way: a program planned into an idle gap ahead of other work
    /// would take the time a later read, which a thread waits on, could have had (a controller
    /// serves reads first).
    pub fn program(&mut self, now: Nanos, at: Nanos, p: PageAddr) -> Nanos {
        self.program_page(now, at, p, false)
    }

    /// [`FlashArray::program`] in the first idle span of die and channel after the block's
    /// previous operation: the programs of the copies the controller schedules into the chips'
    /// idle time (seed 000 §3.2.1, §3.2.2), which wait for the block only.
    pub fn program_in_idle_time(&mut self, now: Nanos, at: Nanos, p: PageAddr) -> Nanos {
        self.program_page(now, at, p, true)
    }

    /// Programs page `p`, its tPROG after the block's previous operation (`in_idle_time`) or
    /// after everything reserved on the die. Returns when the program completes.
    fn program_page(&mut self, now: Nanos, at: Nanos, p: PageAddr, in_idle_time: bool) -> Nanos {
        let ready = self.check_program(p);
        let die = p.block.die.0 as usize;
        let after = if in_idle_time {
            ready
        } else {
            self.dies[die].free_after(at)
        };
        let done = self.place_program(now, at, after, die, self.channel_of(p.block.die));
        assert!(
            done - self.timing.program >= ready,
            "flash invariant broken: program of {p:?} planned before its block's last operation ends"
        );
        self.set_ready(p.block, done);
        done
    }

    /// The channel transfer and tPROG of a program on `die` whose data is in the controller
    /// from `at` and whose tPROG starts no earlier than `after`, in the first idle span of die
    /// and channel that fits. Returns when the program completes.
    fn place_program(
        &mut self,
        now: Nanos,
        at: Nanos,
        after: Nanos,
        die: usize,
        ch: usize,
    ) -> Nanos {
        self.counters.programs += 1;
        let xfer = self.timing.page_transfer;
        let prog = self.timing.program;
        if self.timing.cache_program {
            // The data waits in the cache register for at most the operation before the
            // program's turn on the die (taken to be a program); the die programs it once the
            // data is in.
            let turn = self.dies[die].first_fit((at + xfer).max(after), prog);
            let xfer_start =
                self.channels[ch].reserve(now, at.max(turn.saturating_sub(prog)), xfer);
            let start = self.reserve_die(now, die, (xfer_start + xfer).max(after), prog);
            return start + prog;
        }
        // The die must be free to latch the data: the transfer starts the die's hold.
        let fit = self.fit_die_and_channel(die, ch, at.max(after), xfer + prog, Nanos::ZERO, xfer);
        let start = self.reserve_die(now, die, fit, xfer + prog);
        let xfer_start = self.channels[ch].reserve(now, start, xfer);
        (start + xfer + prog).max(xfer_start + xfer + prog)
    }

    /// The earliest start at or after `from` with die `die` free for `die_span` and channel
    /// `ch` free for `ch_span` from `ch_offset` after the start (alternate first fits on die
    /// and channel, each moving later). Past a few tries it gives the last start found, where
    /// the channel may not be free in time.
    fn fit_die_and_channel(
        &self,
        die: usize,
        ch: usize,
        from: Nanos,
        die_span: Nanos,
        ch_offset: Nanos,
        ch_span: Nanos,
    ) -> Nanos {
        let mut start = self.dies[die].first_fit(from, die_span);
        for _ in 0..16 {
            let on_channel = self.channels[ch].first_fit(start + ch_offset, ch_span);
            if on_channel == start + ch_offset {
                break;
            }
            // The channel is busy then: start later, reaching it as it frees (strictly later
            // than before, as `on_channel > start + ch_offset`).
            start = self.dies[die].first_fit(on_channel - ch_offset, die_span);
        }
        start
    }

    /// Programs one page outside the blocks the array tracks (a staging area, e.g. where a
    /// drive without power-loss protection saves a partial page on Flush): the same channel
    /// transfer and tPROG on `die` as [`FlashArray::program`], counted as a program, with no
    /// block state. Returns when the program completes.
    pub fn program_unmapped(&mut self, now: Nanos, at: Nanos, die: DieId) -> Nanos {
        assert!(
            die.0 < self.geometry.total_dies(),
            "flash address out of the array: {die:?}"
        );
        let ch = self.geometry.channel_of(die) as usize;
        let after = self.dies[die.0 as usize].free_after(at);
        self.place_program(now, at, after, die.0 as usize, ch)
    }

    /// Rolls block `b` back to its first `keep_pages` programmed pages: the programs of the
    /// later pages were cut by a power loss before they completed, so those pages count as
    /// never programmed and may be programmed again (in order, as always). Counters keep the
    /// attempted programs.
    ///
    /// # Panics
    /// If `keep_pages` is more than the block has programmed.
    pub fn forget_programs(&mut self, b: BlockAddr, keep_pages: u32) {
        let st = self.state(b);
        assert!(
            keep_pages <= st.next_page,
            "cannot keep {keep_pages} pages of {b:?}: only {} are programmed",
            st.next_page
        );
        st.next_page = keep_pages;
    }

    /// Drops the die and channel time reserved from `at` on: a power loss at `at` aborts the
    /// operations in flight (block state is rolled back separately, see
    /// [`FlashArray::forget_programs`]).
    pub fn cancel_after(&mut self, at: Nanos) {
        for t in self.dies.iter_mut().chain(self.channels.iter_mut()) {
            t.cancel_after(at);
        }
        for b in self.blocks.iter_mut().flatten().flatten() {
            b.ready = b.ready.min(at);
        }
    }

    /// Reads `bytes` of a page: tR on the die, then the channel transfer out (the die held
    /// until it ends with [`FlashTiming::read_holds_die`]). Returns when the data is in the
    /// controller.
    pub fn read(&mut self, now: Nanos, at: Nanos, p: PageAddr, bytes: u64) -> Nanos {
        self.read_on_die(now, at, p.block.die, bytes)
    }

    /// [`FlashArray::read`] of a page on `die`: its timing depends on the die only.
    #[inline]
    pub fn read_on_die(&mut self, now: Nanos, at: Nanos, die: DieId, bytes: u64) -> Nanos {
        self.counters.reads += 1;
        let ch = self.channel_of(die);
        let die = die.0 as usize;
        let t_r = self.timing.read;
        let bytes = bytes.min(self.geometry.page_size);
        let xfer = match self.last_transfer {
            Some((b, xfer)) if b == bytes => xfer,
            _ => {
                let xfer = self.timing.transfer(bytes, self.geometry.page_size);
                self.last_transfer = Some((bytes, xfer));
                xfer
            }
        };
        if self.timing.read_holds_die {
            return self.read_holding_die(now, at, die, ch, t_r, xfer);
        }
        let sense_start = self.reserve_die(now, die, at, t_r);
        let xfer_start = self.channels[ch].reserve(now, sense_start + t_r, xfer);
        xfer_start + xfer
    }

    /// A read whose die stays busy from sensing until the transfer ends. The controller starts
    /// the sensing so that the page is ready when the channel is
    /// ([`FlashArray::fit_die_and_channel`]); where none was found in time the transfer takes
    /// the channel's first gap after the sensing (the die then may be free before its data is
    /// out).
    fn read_holding_die(
        &mut self,
        now: Nanos,
        at: Nanos,
        die: usize,
        ch: usize,
        t_r: Nanos,
        xfer: Nanos,
    ) -> Nanos {
        let sense = self.fit_die_and_channel(die, ch, at, t_r + xfer, t_r, xfer);
        let sense = self.reserve_die(now, die, sense, t_r + xfer);
        let out = self.channels[ch].reserve(now, sense + t_r, xfer);
        out + xfer
    }

    /// Copies a page within one plane of a die without using the channel (copyback, seed 000
    /// §2.1). Source and destination must share die and plane. The copy takes the first idle
    /// span of the die after the destination block's previous operation.
    pub fn copyback(&mut self, now: Nanos, at: Nanos, src: PageAddr, dst: PageAddr) -> Nanos {
        assert!(
            src.block.die == dst.block.die && src.block.plane == dst.block.plane,
            "copyback across planes: {src:?} -> {dst:?}"
        );
        let ready = self.check_program(dst);
        self.counters.copybacks += 1;
        let d = self.timing.copyback;
        let die = dst.block.die.0 as usize;
        let done = self.reserve_die(now, die, at.max(ready), d) + d;
        self.set_ready(dst.block, done);
        done
    }

    /// When die `die` could start `duration` of work at or after `from` without delaying
    /// anything reserved ([`Timeline::first_fit`]).
    pub fn die_free_span(&self, die: DieId, from: Nanos, duration: Nanos) -> Nanos {
        self.dies[die.0 as usize].first_fit(from, duration)
    }

    /// Erases a block (tBERS on its die, after the block's previous operation). Returns when the
    /// erase completes.
    pub fn erase(&mut self, now: Nanos, at: Nanos, b: BlockAddr) -> Nanos {
        let st = self.state(b);
        st.erase_count += 1;
        st.next_page = 0;
        let ready = st.ready;
        self.counters.erases += 1;
        let d = self.timing.erase;
        let done = self.reserve_die(now, b.die.0 as usize, at.max(ready), d) + d;
        self.set_ready(b, done);
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array() -> FlashArray {
        let g = Geometry {
            channels: 2,
            chips_per_channel: 1,
            dies_per_chip: 1,
            planes_per_die: 1,
            blocks_per_plane: 4,
            pages_per_block: 4,
            page_size: 16384,
        };
        let t = FlashTiming {
            read: Nanos::from_us(35),
            program: Nanos::from_us(390),
            erase: Nanos::from_ms(3),
            copyback: Nanos::from_us(400),
            page_transfer: Nanos::from_us(24),
            read_holds_die: false,
            cache_program: false,
        };
        FlashArray::new(g, t)
    }

    fn page(die: u32, block: u32, page: u32) -> PageAddr {
        PageAddr {
            block: BlockAddr {
                die: DieId(die),
                plane: 0,
                block,
            },
            page,
        }
    }

    #[test]
    fn program_is_transfer_then_tprog_and_dies_overlap() {
        let mut a = array();
        let t0 = a.program(Nanos(0), Nanos(0), page(0, 0, 0));
        assert_eq!(t0, Nanos::from_us(24 + 390));
        // Another die on another channel runs in parallel.
        assert_eq!(a.program(Nanos(0), Nanos(0), page(1, 0, 0)), t0);
        // The same die queues behind.
        assert_eq!(a.program(Nanos(0), Nanos(0), page(0, 0, 1)), t0 + t0);
        assert_eq!(a.counters().programs, 3);
    }

    /// With cache program a die takes the next page while it programs the last: back-to-back
    /// programs cost tPROG each after the first transfer, and a transfer waits in the cache
    /// register for at most the program under way, leaving the channel free meanwhile.
    #[test]
    fn cache_program_moves_the_next_page_while_the_die_programs() {
        let mut a = array();
        a.set_modes_from(&FlashTiming {
            cache_program: true,
            ..a.timing().clone()
        });
        let (xfer, prog) = (Nanos::from_us(24), Nanos::from_us(390));
        let t0 = Nanos(0);
        assert_eq!(a.program(t0, t0, page(0, 0, 0)), xfer + prog);
        assert_eq!(a.program(t0, t0, page(0, 0, 1)), xfer + prog.times(2));
        // The third page's data can enter the register only once the second program begins
        // (at xfer + prog): the channel stays free before then.
        assert_eq!(a.program(t0, t0, page(0, 0, 2)), xfer + prog.times(3));
        assert_eq!(a.channels[0].first_fit(xfer.times(2), xfer), xfer.times(2));
        assert_eq!(
            a.channels[0].first_fit(xfer + prog, xfer),
            xfer + prog + xfer,
            "the third page crosses the channel as the second program begins"
        );
        // Without it each program holds the die for its transfer too.
        let mut b = array();
        b.program(t0, t0, page(0, 0, 0));
        assert_eq!(b.program(t0, t0, page(0, 0, 1)), (xfer + prog).times(2));
    }

    /// A copy's program takes an idle span of its die ahead of work planned later, but the
    /// next page of its block waits for the page before; a host program follows everything
    /// planned on the die.
    #[test]
    fn copy_programs_fill_idle_time_in_block_order() {
        let mut a = array();
        let t0 = Nanos(0);
        let page_op = Nanos::from_us(24 + 390);
        // Page 0 of block 0 has its data only at 1 ms.
        let first = a.program(t0, Nanos::from_ms(1), page(0, 0, 0));
        assert_eq!(first, Nanos::from_ms(1) + page_op);
        // A copy into block 1 programs before it, in the idle die's time.
        assert_eq!(a.program_in_idle_time(t0, t0, page(0, 1, 0)), page_op);
        // A copy into page 1 of block 0 follows page 0 although the die is idle earlier.
        assert_eq!(
            a.program_in_idle_time(t0, t0, page(0, 0, 1)),
            first + page_op
        );
        // A host program into block 2 goes after all of it.
        assert_eq!(a.program(t0, t0, page(0, 2, 0)), first + page_op.times(2));
        // With cache program too, the copy takes the idle time before the planned page.
        let mut c = array();
        c.set_modes_from(&FlashTiming {
            cache_program: true,
            ..c.timing().clone()
        });
        c.program(t0, Nanos::from_ms(1), page(0, 0, 0));
        assert_eq!(c.program_in_idle_time(t0, t0, page(0, 1, 0)), page_op);
    }

    /// A copyback or erase takes an idle span of its die, but not one before its block's
    /// previous operation ends: NAND programs a block's pages in order in time, not only in
    /// the order they are asked for.
    #[test]
    fn copybacks_and_erases_wait_for_their_blocks_last_operation() {
        let mut a = array();
        let t0 = Nanos(0);
        let (page_op, cb) = (Nanos::from_us(24 + 390), Nanos::from_us(400));
        // Page 0 of block 0 has its data only at 1 ms: the die is idle before.
        let first = a.program(t0, Nanos::from_ms(1), page(0, 0, 0));
        assert_eq!(first, Nanos::from_ms(1) + page_op);
        // A copyback into another block takes the idle time.
        assert_eq!(a.copyback(t0, t0, page(0, 2, 0), page(0, 1, 0)), cb);
        // A copyback into block 0 waits for its page 0.
        assert_eq!(a.copyback(t0, t0, page(0, 2, 0), page(0, 0, 1)), first + cb);
        // So does an erase of block 0; block 1's fits in the die's idle time after its copy.
        let erase = Nanos::from_ms(3);
        assert_eq!(a.erase(t0, t0, page(0, 0, 0).block), first + cb + erase);
        let mut b = array();
        b.program(t0, Nanos::from_ms(4), page(0, 0, 0));
        b.copyback(t0, t0, page(0, 2, 0), page(0, 1, 0));
        assert_eq!(b.erase(t0, t0, page(0, 1, 0).block), cb + erase);
    }

    /// An array loaded from an image does not know its blocks' order: their copybacks follow
    /// everything reserved on their dies before the save.
    #[test]
    fn a_loaded_array_orders_its_blocks_after_its_dies_reservations() {
        let mut a = array();
        let t0 = Nanos(0);
        a.copyback(t0, Nanos::from_ms(1), page(0, 2, 0), page(0, 0, 0));
        let fields = FlashArrayFields {
            geometry: a.geometry.clone(),
            timing: a.timing.clone(),
            dies: a.dies.clone(),
            channels: a.channels.clone(),
            blocks: a.blocks.clone(),
            counters: a.counters,
        };
        let mut loaded = FlashArray::try_from(fields).expect("valid fields");
        let cb = Nanos::from_us(400);
        assert_eq!(
            loaded.copyback(t0, t0, page(0, 2, 0), page(0, 0, 1)),
            Nanos::from_ms(1) + cb.times(2)
        );
        // A power cut at 0 aborts the planned copy: the block is ready at once again.
        loaded.cancel_after(t0);
        loaded.forget_programs(page(0, 0, 0).block, 0);
        assert_eq!(loaded.copyback(t0, t0, page(0, 2, 0), page(0, 0, 0)), cb);
    }

    #[test]
    fn read_is_sense_then_transfer() {
        let mut a = array();
        assert_eq!(
            a.read(Nanos(0), Nanos(0), page(0, 0, 0), 16384),
            Nanos::from_us(59)
        );
        assert_eq!(
            a.read(Nanos(0), Nanos(0), page(0, 0, 0), 4096),
            Nanos::from_us(35 + 35 + 6)
        );
    }

    /// Without cache read the die senses the next page only once the last one is out.
    #[test]
    fn a_read_holding_its_die_keeps_it_until_the_data_is_out() {
        let mut a = array();
        a.set_modes_from(&FlashTiming {
            read_holds_die: true,
            ..a.timing().clone()
        });
        let t0 = Nanos(0);
        assert_eq!(a.read(t0, t0, page(0, 0, 0), 16384), Nanos::from_us(59));
        assert_eq!(
            a.read(t0, t0, page(0, 0, 0), 4096),
            Nanos::from_us(59 + 35 + 6)
        );
        // The die was busy for both reads' sensing and transfers.
        let busy: u64 = a.die_busy_log().iter().sum();
        assert_eq!(Nanos(busy), Nanos::from_us(59 + 41));
        // Another die on another channel is not held.
        assert_eq!(a.read(t0, t0, page(1, 0, 0), 16384), Nanos::from_us(59));
    }

    #[test]
    #[should_panic(expected = "programmed in order")]
    fn out_of_order_program_is_caught() {
        let mut a = array();
        a.program(Nanos(0), Nanos(0), page(0, 1, 1));
    }

    #[test]
    #[should_panic(expected = "after erase")]
    fn program_of_a_full_block_needs_erase() {
        let mut a = array();
        for p in 0..4 {
            a.program(Nanos(0), Nanos(0), page(0, 2, p));
        }
        a.program(Nanos(0), Nanos(0), page(0, 2, 4));
    }

    #[test]
    fn forgotten_programs_can_be_programmed_again() {
        let mut a = array();
        for p in 0..3 {
            a.program(Nanos(0), Nanos(0), page(0, 1, p));
        }
        let b = page(0, 1, 0).block;
        a.forget_programs(b, 1);
        assert_eq!(a.programmed_pages(b), 1);
        a.program(Nanos(0), Nanos(0), page(0, 1, 1));
        assert_eq!(a.counters().programs, 4);
        a.cancel_after(Nanos(0));
        // The die is idle again: a program starts at once.
        assert_eq!(
            a.program(Nanos(0), Nanos(0), page(0, 1, 2)),
            Nanos::from_us(24 + 390)
        );
    }

    #[test]
    #[should_panic(expected = "only 0 are programmed")]
    fn cannot_keep_pages_never_programmed() {
        let mut a = array();
        a.forget_programs(page(1, 0, 0).block, 1);
    }

    #[test]
    fn unmapped_programs_take_die_time_but_no_page() {
        let mut a = array();
        let t = a.program_unmapped(Nanos(0), Nanos(0), DieId(0));
        assert_eq!(t, Nanos::from_us(24 + 390));
        assert_eq!(a.program(Nanos(0), Nanos(0), page(0, 0, 0)), t + t);
        assert_eq!(a.counters().programs, 2);
        assert_eq!(a.programmed_pages(page(0, 0, 0).block), 1);
    }

    #[test]
    fn erase_counts_wear_and_rewinds() {
        let mut a = array();
        for p in 0..4 {
            a.program(Nanos(0), Nanos(0), page(1, 3, p));
        }
        let b = page(1, 3, 0).block;
        a.erase(Nanos(0), Nanos(0), b);
        assert_eq!(a.erase_count(b), 1);
        assert_eq!(a.programmed_pages(b), 0);
        a.program(Nanos(0), Nanos(0), page(1, 3, 0));
        assert_eq!(a.wear_summary(), (1, 1));
    }
}
