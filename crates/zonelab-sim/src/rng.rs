//! Seeded random numbers: one root seed, independent named streams.

use rand::{Rng, RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A deterministic random stream. Streams forked from the same seed with the same id are
/// identical; different ids are independent, so adding a consumer never shifts another's draws.
#[derive(Clone, Debug)]
pub struct SimRng {
    inner: Xoshiro256PlusPlus,
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SimRng {
    pub fn new(seed: u64) -> SimRng {
        SimRng {
            inner: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }
    /// An independent stream for consumer `stream` derived from `seed`.
    pub fn stream(seed: u64, stream: u64) -> SimRng {
        SimRng::new(splitmix64(seed ^ splitmix64(stream.wrapping_add(1))))
    }
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "random draw from an empty range");
        self.inner.random_range(0..n)
    }
    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        self.inner.random::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let a: Vec<u64> = (0..8)
            .map({
                let mut r = SimRng::stream(7, 3);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..8)
            .map({
                let mut r = SimRng::stream(7, 3);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        let mut c = SimRng::stream(7, 4);
        assert_ne!(a[0], c.next_u64());
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = SimRng::new(1);
        for n in 1..200 {
            assert!(r.below(n) < n);
        }
    }
}
