//! `zonelab zns` (helper in progress).
use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct ZnsArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<String>,
}

pub fn run(_a: ZnsArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("zonelab zns is not built yet")
}
