//! The simulated clock's unit.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in or a span of simulated time, in nanoseconds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Nanos(pub u64);

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);
    pub const MAX: Nanos = Nanos(u64::MAX);

    #[inline]
    pub const fn from_us(us: u64) -> Nanos {
        Nanos(us * 1_000)
    }
    #[inline]
    pub const fn from_ms(ms: u64) -> Nanos {
        Nanos(ms * 1_000_000)
    }
    #[inline]
    pub const fn from_secs(s: u64) -> Nanos {
        Nanos(s * 1_000_000_000)
    }
    /// Rounds a fractional number of nanoseconds to the nearest integer (negative becomes 0).
    #[inline]
    pub fn from_f64_ns(ns: f64) -> Nanos {
        if ns.is_finite() && ns > 0.0 {
            Nanos(ns.round() as u64)
        } else {
            Nanos(0)
        }
    }
    #[inline]
    pub const fn as_u64(self) -> u64 {
        self.0
    }
    #[inline]
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    #[inline]
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }
    #[inline]
    pub fn saturating_sub(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(other.0))
    }
    /// Time to move `bytes` at `bytes_per_sec`, rounded up to a whole nanosecond.
    #[inline]
    pub fn for_transfer(bytes: u64, bytes_per_sec: u64) -> Nanos {
        assert!(bytes_per_sec > 0, "transfer at zero bandwidth");
        if bytes < (1 << 34) {
            return Nanos((bytes * 1_000_000_000).div_ceil(bytes_per_sec));
        }
        let ns = (bytes as u128 * 1_000_000_000).div_ceil(bytes_per_sec as u128);
        Nanos(ns as u64)
    }
    #[inline]
    pub fn times(self, k: u64) -> Nanos {
        Nanos(self.0 * k)
    }
}

impl From<u64> for Nanos {
    #[inline]
    fn from(ns: u64) -> Nanos {
        Nanos(ns)
    }
}

impl Add for Nanos {
    type Output = Nanos;
    #[inline]
    fn add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0 + rhs.0)
    }
}
impl AddAssign for Nanos {
    #[inline]
    fn add_assign(&mut self, rhs: Nanos) {
        self.0 += rhs.0;
    }
}
impl Sub for Nanos {
    type Output = Nanos;
    #[inline]
    fn sub(self, rhs: Nanos) -> Nanos {
        assert!(self.0 >= rhs.0, "negative time span: {} - {}", self, rhs);
        Nanos(self.0 - rhs.0)
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n < 1_000 {
            write!(f, "{n}ns")
        } else if n < 1_000_000 {
            write!(f, "{:.2}us", n as f64 / 1e3)
        } else if n < 1_000_000_000 {
            write!(f, "{:.2}ms", n as f64 / 1e6)
        } else {
            write!(f, "{:.3}s", n as f64 / 1e9)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_rounds_up() {
        assert_eq!(Nanos::for_transfer(4096, 1_000_000_000), Nanos(4096));
        assert_eq!(Nanos::for_transfer(1, 3_000_000_000), Nanos(1));
        assert_eq!(Nanos::for_transfer(0, 5), Nanos(0));
    }

    #[test]
    fn display_picks_unit() {
        assert_eq!(Nanos(999).to_string(), "999ns");
        assert_eq!(Nanos(11_360).to_string(), "11.36us");
        assert_eq!(Nanos::from_ms(16).to_string(), "16.00ms");
        assert_eq!(Nanos::from_secs(2).to_string(), "2.000s");
    }

    #[test]
    #[should_panic(expected = "negative time span")]
    fn negative_span_is_a_bug() {
        let _ = Nanos(1) - Nanos(2);
    }
}
