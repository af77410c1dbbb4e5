//! fio-compatible jobs: fio's option names and job files ([`options`]), a runner that executes
//! them concurrently in virtual time on a simulated device ([`run`]), and fio's JSON and normal
//! output ([`report`]) from per-direction statistics ([`stats`]).

pub mod options;
pub mod report;
pub mod run;
pub mod stats;
pub mod units;
