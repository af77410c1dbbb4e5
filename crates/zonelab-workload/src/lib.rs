//! Workloads for ZoneLab: fio-compatible jobs on a raw device ([`fio`]) and file-system
//! workloads on any `FileSystem` ([`fs`]: filebench personalities, fio jobs on files, mdtest).

pub mod fio;
pub mod fs;
pub mod zbench;
