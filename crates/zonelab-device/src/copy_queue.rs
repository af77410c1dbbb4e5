//! The operations a ZNS+ device has queued for its chips (seed 000 §3.2.1): zone_compaction
//! chunk copies, and host programs waiting behind them. A flash block's pages are programmed
//! in order, so the operations into one block (a zone has one block per die) go in arrival
//! order; operations into different blocks may overtake each other. The queue keeps one FIFO
//! per block, so the device looks at the first operation of each block without walking every
//! queued one (a compaction queues thousands while its chips serve normal requests).

use std::collections::{BTreeMap, VecDeque};
use zonelab_flash::DieId;

/// A destination flash block: (zone, die).
pub(crate) type BlockKey = (u32, DieId);

/// Something queued for a flash block, in arrival order (`seq`).
pub(crate) trait Queued {
    fn block(&self) -> BlockKey;
    fn seq(&self) -> u64;
    fn set_seq(&mut self, seq: u64);
}

/// Per-block FIFOs of queued operations.
#[derive(Clone, Debug)]
pub(crate) struct CopyQueue<T> {
    blocks: BTreeMap<BlockKey, VecDeque<T>>,
    next_seq: u64,
    len: usize,
}

impl<T> Default for CopyQueue<T> {
    fn default() -> Self {
        CopyQueue {
            blocks: BTreeMap::new(),
            next_seq: 0,
            len: 0,
        }
    }
}

impl<T: Queued> CopyQueue<T> {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queues `op` behind everything queued before it.
    pub fn push(&mut self, mut op: T) {
        op.set_seq(self.next_seq);
        self.next_seq += 1;
        self.len += 1;
        self.blocks.entry(op.block()).or_default().push_back(op);
    }

    /// Whether anything is queued for `block`.
    pub fn has_block(&self, block: BlockKey) -> bool {
        self.blocks.contains_key(&block)
    }

    /// Whether anything is queued for a block of `zone`.
    pub fn has_zone(&self, zone: u32) -> bool {
        self.blocks
            .range((zone, DieId(0))..=(zone, DieId(u32::MAX)))
            .next()
            .is_some()
    }

    /// The first operation of each block, in arrival order.
    pub fn heads(&self) -> Vec<(u64, BlockKey)> {
        let mut heads: Vec<(u64, BlockKey)> = self
            .blocks
            .iter()
            .map(|(&k, q)| (q.front().expect("no empty FIFO is kept").seq(), k))
            .collect();
        heads.sort_unstable();
        heads
    }

    /// Each block with its FIFO, in the arrival order of their first operations (the order of
    /// [`CopyQueue::heads`]), to walk the queue depth by depth without a lookup per operation.
    pub fn fifos_mut(&mut self) -> Vec<(BlockKey, &mut VecDeque<T>)> {
        let mut fifos: Vec<(BlockKey, &mut VecDeque<T>)> =
            self.blocks.iter_mut().map(|(&k, q)| (k, q)).collect();
        fifos.sort_unstable_by_key(|(_, q)| q.front().expect("no empty FIFO is kept").seq());
        fifos
    }

    /// The first operation queued for `block`.
    pub fn head(&self, block: BlockKey) -> Option<&T> {
        self.blocks.get(&block).and_then(|q| q.front())
    }

    pub fn head_mut(&mut self, block: BlockKey) -> Option<&mut T> {
        self.blocks.get_mut(&block).and_then(|q| q.front_mut())
    }

    /// Takes the first operation queued for `block`.
    pub fn pop_head(&mut self, block: BlockKey) -> Option<T> {
        let q = self.blocks.get_mut(&block)?;
        let op = q.pop_front();
        if q.is_empty() {
            self.blocks.remove(&block);
        }
        if op.is_some() {
            self.len -= 1;
        }
        op
    }

    /// Every queued operation (block after block, each block's in order).
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.blocks.values().flatten()
    }

    /// The operations queued for `block`, in order.
    pub fn block_ops(&self, block: BlockKey) -> impl Iterator<Item = &T> {
        self.blocks.get(&block).into_iter().flatten()
    }

    /// Takes the operations `pick` selects, in arrival order.
    pub fn take_where(&mut self, mut pick: impl FnMut(&T) -> bool) -> Vec<T> {
        let mut taken = Vec::new();
        for q in self.blocks.values_mut() {
            let mut kept = VecDeque::with_capacity(q.len());
            for op in q.drain(..) {
                if pick(&op) {
                    taken.push(op);
                } else {
                    kept.push_back(op);
                }
            }
            *q = kept;
        }
        self.blocks.retain(|_, q| !q.is_empty());
        self.len -= taken.len();
        taken.sort_unstable_by_key(|op| op.seq());
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Op {
        zone: u32,
        die: u32,
        seq: u64,
    }

    impl Queued for Op {
        fn block(&self) -> BlockKey {
            (self.zone, DieId(self.die))
        }
        fn seq(&self) -> u64 {
            self.seq
        }
        fn set_seq(&mut self, seq: u64) {
            self.seq = seq;
        }
    }

    fn op(zone: u32, die: u32) -> Op {
        Op { zone, die, seq: 0 }
    }

    #[test]
    fn blocks_keep_arrival_order_and_heads_come_oldest_first() {
        let mut q = CopyQueue::default();
        q.push(op(1, 3));
        q.push(op(0, 2));
        q.push(op(1, 3));
        q.push(op(2, 0));
        assert_eq!(
            q.heads(),
            vec![(0, (1, DieId(3))), (1, (0, DieId(2))), (3, (2, DieId(0)))]
        );
        assert!(q.has_zone(1) && q.has_zone(2) && !q.has_zone(3));
        assert_eq!(q.pop_head((1, DieId(3))).unwrap().seq, 0);
        assert_eq!(q.head((1, DieId(3))).unwrap().seq, 2);
        assert_eq!(q.pop_head((1, DieId(3))).unwrap().seq, 2);
        assert!(!q.has_block((1, DieId(3))));
        assert_eq!(q.iter().count(), 2);
        let taken = q.take_where(|o| o.zone == 2 || o.zone == 0);
        assert_eq!(taken.iter().map(|o| o.seq).collect::<Vec<_>>(), vec![1, 3]);
        assert!(q.is_empty());
    }
}
