//! Division by a divisor fixed at construction: a shift and a mask when it is a power of two
//! (the usual case for zone sizes, chunk widths and channel counts), a hardware division
//! otherwise. Results are identical either way.

use std::num::NonZeroU64;

/// A fixed, non-zero divisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Divisor {
    d: NonZeroU64,
    /// `d - 1` when `d` is a power of two (the remainder's mask), else 0.
    mask: u64,
    /// `log2(d)` when `d` is a power of two.
    shift: u32,
    pow2: bool,
}

impl Divisor {
    /// Panics on zero.
    pub const fn new(d: u64) -> Divisor {
        let Some(nz) = NonZeroU64::new(d) else {
            panic!("division by zero");
        };
        let pow2 = d.is_power_of_two();
        Divisor {
            d: nz,
            mask: if pow2 { d - 1 } else { 0 },
            shift: d.trailing_zeros(),
            pow2,
        }
    }

    /// The divisor.
    #[inline]
    pub const fn get(self) -> u64 {
        self.d.get()
    }

    /// `x / d`.
    #[inline]
    pub fn quotient(self, x: u64) -> u64 {
        if self.pow2 {
            x >> self.shift
        } else {
            x / self.d
        }
    }

    /// `x % d`.
    #[inline]
    pub fn remainder(self, x: u64) -> u64 {
        if self.pow2 { x & self.mask } else { x % self.d }
    }

    /// `(x / d, x % d)`.
    #[inline]
    pub fn div_rem(self, x: u64) -> (u64, u64) {
        if self.pow2 {
            (x >> self.shift, x & self.mask)
        } else {
            (x / self.d, x % self.d)
        }
    }
}

impl serde::Serialize for Divisor {
    /// As the plain number, so a field can change from an integer to a `Divisor` without
    /// changing any encoding.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.d.get())
    }
}

impl<'de> serde::Deserialize<'de> for Divisor {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = u64::deserialize(d)?;
        if v == 0 {
            return Err(serde::de::Error::custom("divisor of zero"));
        }
        Ok(Divisor::new(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn same_as_division(d in 1u64..5000, x in any::<u64>(), p in 0u32..64) {
            for d in [d, 1u64 << p] {
                let v = Divisor::new(d);
                prop_assert_eq!(v.quotient(x), x / d);
                prop_assert_eq!(v.remainder(x), x % d);
                prop_assert_eq!(v.div_rem(x), (x / d, x % d));
                prop_assert_eq!(v.get(), d);
            }
        }
    }
}
