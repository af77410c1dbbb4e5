//! The parts of the `zonelab` command that read user files without simulating: device image
//! files ([`image`]) and `zonelab run` experiments ([`experiment`]). A library so that tests and
//! the fuzz targets (`fuzz/`) can call the parsers directly.

pub mod experiment;
pub mod image;
