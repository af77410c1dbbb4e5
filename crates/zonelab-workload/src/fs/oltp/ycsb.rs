//! YCSB workloads a and f on one InnoDB table (`usertable`), as YCSB's JDBC binding drives
//! MySQL: autocommitted single-record statements on records of `record_size` bytes (ten
//! fields of 100 bytes by default), keys drawn by YCSB's scrambled zipfian distribution
//! (Gray et al.'s generator with YCSB's default constant 0.99, ranks scattered over the key
//! space by FNV-1a 64 as YCSB's `ScrambledZipfianGenerator` does).

use super::innodb::{Access, PageId, Step1, Txn};
use serde::{Deserialize, Serialize};
use zonelab_sim::SimRng;

/// The two YCSB core workloads seed 000 ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum YcsbMix {
    /// Workload a: 50% reads, 50% updates of one field.
    A,
    /// Workload f: 50% reads, 50% read-modify-writes.
    F,
}

/// Sum of i^-theta for i in 1..=n: exact for the first million terms, then the
/// Euler-Maclaurin estimate of the rest (relative error far below 1e-9 there).
pub fn zeta(n: u64, theta: f64) -> f64 {
    const EXACT: u64 = 1_000_000;
    let m = n.min(EXACT);
    let mut s = 0.0;
    for i in 1..=m {
        s += (i as f64).powf(-theta);
    }
    if n > m {
        let (a, b) = (m as f64, n as f64);
        s += (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta)
            + (b.powf(-theta) - a.powf(-theta)) / 2.0
            + theta / 12.0 * (a.powf(-theta - 1.0) - b.powf(-theta - 1.0));
    }
    s
}

/// YCSB's `ZipfianGenerator`: ranks 0..n, rank 0 the most popular.
#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipf {
    /// `theta` in (0, 1); `n` at least 1.
    pub fn new(n: u64, theta: f64) -> Zipf {
        let zetan = zeta(n, theta);
        let zeta2 = zeta(2.min(n), theta);
        let eta = if n > 2 {
            (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan)
        } else {
            1.0
        };
        Zipf {
            n,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta,
        }
    }

    pub fn next(&self, rng: &mut SimRng) -> u64 {
        let u = rng.unit();
        let uz = u * self.zetan;
        if uz < 1.0 || self.n == 1 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let r = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.n - 1)
    }
}

/// YCSB's `fnvhash64` (FNV-1a over the eight bytes of `v`, low byte first).
pub fn fnv64(mut v: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
        v >>= 8;
    }
    h
}

/// The YCSB transaction generator.
pub(crate) struct Ycsb {
    pub mix: YcsbMix,
    pub space: u16,
    pub records: u64,
    pub per_page: u64,
    pub zipf: Option<Zipf>,
    pub redo_update: u32,
}

impl Ycsb {
    /// A record's key: a scrambled zipfian rank, or uniform without a zipfian constant.
    pub fn key(&self, rng: &mut SimRng) -> u64 {
        match &self.zipf {
            Some(z) => fnv64(z.next(rng)) % self.records,
            None => rng.below(self.records),
        }
    }

    fn page(&self, key: u64) -> PageId {
        PageId {
            space: self.space,
            page: (key / self.per_page) as u32,
        }
    }

    pub fn next(&self, rng: &mut SimRng) -> Txn {
        let read = rng.below(2) == 0;
        let page = self.page(self.key(rng));
        let step = |access| Step1 {
            page,
            access,
            redo: self.redo_update,
        };
        if read {
            return Txn {
                name: "read",
                steps: vec![step(Access::Read)],
                statements: 1,
            };
        }
        match self.mix {
            YcsbMix::A => Txn {
                name: "update",
                steps: vec![step(Access::Modify)],
                statements: 1,
            },
            YcsbMix::F => Txn {
                name: "read_modify_write",
                steps: vec![step(Access::Read), step(Access::Modify)],
                statements: 2,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn zeta_tail_estimate_matches_the_sum() {
        let exact: f64 = (1..=3_000_000u64).map(|i| (i as f64).powf(-0.99)).sum();
        let est = zeta(3_000_000, 0.99);
        assert!((exact - est).abs() / exact < 1e-9, "{exact} vs {est}");
    }

    #[test]
    fn zipfian_ranks_are_skewed_like_ycsb() {
        let z = Zipf::new(10_000, 0.99);
        let mut rng = SimRng::new(4);
        let n = 200_000;
        let mut hist = vec![0u64; 10_000];
        for _ in 0..n {
            hist[z.next(&mut rng) as usize] += 1;
        }
        // P(rank 0) = 1 / zeta(n): about 10% for 10,000 items at 0.99.
        let p0 = hist[0] as f64 / n as f64;
        let want = 1.0 / zeta(10_000, 0.99);
        assert!((p0 - want).abs() < 0.01, "{p0} vs {want}");
        // The top 1% of ranks take well over a third of the draws.
        let top: u64 = hist[..100].iter().sum();
        assert!(top as f64 / n as f64 > 0.4, "{top}");
    }

    proptest! {
        #[test]
        fn zipfian_stays_in_range(n in 1u64..5_000, theta in 0.05f64..0.995, seed: u64) {
            let z = Zipf::new(n, theta);
            let mut rng = SimRng::new(seed);
            for _ in 0..200 {
                prop_assert!(z.next(&mut rng) < n);
            }
        }
    }
}
