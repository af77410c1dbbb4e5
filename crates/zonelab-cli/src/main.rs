//! `zonelab`: fio-style jobs, nvme-cli-style device tools and benchmarks on simulated ZNS SSDs.

mod bench_cmd;
mod crashtest;
mod fio_cmd;
mod fs_cmd;
mod mount;
mod plot;
mod reproduce_cmd;
mod reproduce_zns_plus;
mod run_cmd;
mod zbench_cmd;
mod zns_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use zonelab_cli::image;

/// mimalloc instead of the system allocator: the same results, file-system runs 8-33% faster
/// (README, Speed).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "zonelab",
    version,
    about = "A laboratory for zoned storage: deterministic simulation of NVMe ZNS SSDs",
    long_about = "A laboratory for zoned storage: deterministic simulation of NVMe ZNS SSDs.\n\n\
                  Examples:\n  zonelab fio --profile=zn540 --name=w --rw=write --bs=4k --zonemode=zbd --size=1g\n  \
                  zonelab zns create dev.img --profile zn540 --set zones=16\n  \
                  zonelab zns report-zones dev.img"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run fio jobs on a simulated device (fio's options and job files; see `zonelab fio --help`).
    #[command(disable_help_flag = true)]
    Fio {
        /// fio arguments: --name=value options and job file paths.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Device tools on an image file, shaped like nvme-cli's zns plugin.
    Zns(zns_cmd::ZnsArgs),
    /// Measure simulated commands per wall-clock second.
    Bench(bench_cmd::BenchArgs),
    /// Zone-management benchmark of the ZN540 characterization (reset, finish, open, close).
    Zbench(zbench_cmd::ZbenchArgs),
    /// Run a file-system experiment (device, policy, workload, seed, length) and write its JSON.
    Run(run_cmd::RunArgs),
    /// Create a file system on a device image (the device needs conventional zones).
    Mkfs(fs_cmd::MkfsArgs),
    /// Check a device image's file system (the image is not changed); exit 4 on problems.
    Fsck(fs_cmd::FsckArgs),
    /// Mount a device image's file system through FUSE (as root) and serve it until unmounted.
    Mount(mount::MountArgs),
    /// Unmount a `zonelab mount` and wait until its image is written back.
    Umount(mount::UmountArgs),
    /// Print a mounted image's live device and file-system counters (JSON).
    Stats(mount::StatsArgs),
    /// Run a paper's experiments and print its values next to ZoneLab's (table, JSON, plots).
    Reproduce(reproduce_cmd::ReproduceArgs),
    /// Crash-consistency test: record a workload's device commands, cut the power at every
    /// flush and at sampled points between, mount, fsck and check what fsync and sync made
    /// durable (exit 1 on any failure).
    Crashtest(crashtest::CrashtestArgs),
    /// List the built-in device profiles, or print one.
    Profiles {
        /// Profile to print as TOML (after --set overrides).
        name: Option<String>,
        /// Override a profile field, e.g. --set zones=64 (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
}

/// Output piped into a program that stops reading (`zonelab zns report-zones | head`) ends
/// `zonelab` quietly, as it ends `cat`, instead of panicking in `println!`: Rust ignores
/// SIGPIPE by default, so the default action is restored.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Fio { args } => fio_cmd::run(&args),
        Command::Zns(a) => zns_cmd::run(a),
        Command::Bench(a) => bench_cmd::run(a),
        Command::Reproduce(a) => reproduce_cmd::run(a),
        Command::Zbench(a) => zbench_cmd::run(a),
        Command::Run(a) => run_cmd::run(a),
        Command::Mkfs(a) => fs_cmd::mkfs(a),
        Command::Fsck(a) => fs_cmd::fsck(a),
        Command::Mount(a) => mount::mount(a),
        Command::Umount(a) => mount::umount(a),
        Command::Stats(a) => mount::stats(a),
        Command::Crashtest(a) => crashtest::run(a),
        Command::Profiles { name, set } => profiles(name, &set),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("zonelab: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn profiles(name: Option<String>, set: &[String]) -> anyhow::Result<ExitCode> {
    use zonelab_device::Profile;
    match name {
        None if !set.is_empty() => anyhow::bail!(
            "--set overrides a field of the profile printed: name one, e.g. `zonelab profiles zn540 --set {}`",
            set[0]
        ),
        None => {
            for (n, _) in zonelab_device::profile::BUILTIN {
                let p = Profile::load(n, &[])?;
                println!("{n:<16} {}", p.description);
            }
        }
        Some(n) => {
            let p = Profile::load(&n, &Profile::parse_overrides(set)?)?;
            print!("{}", p.to_toml());
            println!(
                "# derived: zone capacity {} LBAs ({} bytes), zone size {} LBAs, {} chip group(s)",
                p.zone_capacity_lbas(),
                p.zone_capacity_lbas() * p.lba_size(),
                p.zone_size_lbas(),
                p.fcg_count()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
