//! Controller firmware cores: each command costs CPU time on one of them.

use crate::Timeline;
use serde::{Deserialize, Serialize};
use zonelab_sim::Nanos;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Firmware {
    cores: Vec<Timeline>,
}

impl Firmware {
    pub fn new(cores: u32) -> Firmware {
        assert!(cores > 0, "firmware needs at least one core");
        Firmware {
            cores: vec![Timeline::new(); cores as usize],
        }
    }

    /// Runs `cost` of firmware work on the core that can start it first (lowest index on ties);
    /// returns when it finishes.
    #[inline(always)]
    pub fn run(&mut self, now: Nanos, at: Nanos, cost: Nanos) -> Nanos {
        if self.cores.len() == 1 {
            return self.cores[0].reserve(now, at, cost) + cost;
        }
        let best = (0..self.cores.len())
            .min_by_key(|&i| self.cores[i].free_after(at))
            .expect("at least one core");
        self.cores[best].reserve(now, at, cost) + cost
    }

    /// Drops the work reserved from `at` on (a power loss at `at` aborts it).
    pub fn cancel_after(&mut self, at: Nanos) {
        for c in &mut self.cores {
            c.cancel_after(at);
        }
    }

    pub fn busy_total(&self) -> Nanos {
        self.cores
            .iter()
            .map(|c| c.busy_total())
            .fold(Nanos::ZERO, |a, b| a + b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_over_cores() {
        let mut f = Firmware::new(2);
        assert_eq!(f.run(Nanos(0), Nanos(0), Nanos(10)), Nanos(10));
        assert_eq!(f.run(Nanos(0), Nanos(0), Nanos(10)), Nanos(10));
        assert_eq!(f.run(Nanos(0), Nanos(0), Nanos(10)), Nanos(20));
    }
}
