//! Virtual time for ZoneLab.
//!
//! Everything in ZoneLab runs in simulated time: a nanosecond clock ([`Nanos`]), a deterministic
//! single-threaded async executor ([`Sim`]) whose tasks are the simulated host threads, timers,
//! simulated synchronization ([`sync`]) and seeded random numbers ([`SimRng`]). Nothing here reads
//! the wall clock, so the same program and seed always produce the same schedule.
//!
//! Why an executor of our own: tokio's paused clock resolves timers to milliseconds and its
//! scheduler is not deterministic across runs; flash operations need nanosecond timers and
//! experiments need byte-identical results (DESIGN.md, principle 1).

mod divisor;
mod executor;
mod race;
mod rng;
pub mod sync;
mod time;
mod timers;

pub use divisor::Divisor;
pub use executor::{JoinHandle, Sim, SimStats};
pub use race::{Race, Raced, race};
pub use rng::SimRng;
pub use time::Nanos;
