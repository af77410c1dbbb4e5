//! Workloads for ZoneLab. Today: fio-compatible jobs on a raw device ([`fio`]).

pub mod fio;
pub mod zbench;
