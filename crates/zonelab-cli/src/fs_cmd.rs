//! `zonelab mkfs` and `zonelab fsck`: the file system on a device image (see `zonelab zns
//! create`). The image's zoned device needs conventional zones for the metadata.

use crate::image::{self, Image};
use anyhow::{Context, Result, bail};
use clap::Args;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use zonelab_device::{HostStack, IoEngine, IoScheduler, Namespace};
use zonelab_lfs::fs::{Fs, FsOptions};
use zonelab_lfs::layout::FormatOptions;
use zonelab_lfs::policy;
use zonelab_sim::Sim;

#[derive(Args, Debug)]
pub struct MkfsArgs {
    /// Device image to format (created by `zonelab zns create`).
    image: PathBuf,
    /// Segments per zone (1: a segment is a whole zone).
    #[arg(long, default_value_t = 1)]
    segs_per_zone: u32,
}

#[derive(Args, Debug)]
pub struct FsckArgs {
    /// Device image holding a file system.
    image: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// The image's device behind the kernel I/O path F2FS uses on zoned drives, on a simulation
/// continuing the image's clock.
fn stack_for(img: Image) -> Result<(Sim, Rc<HostStack>)> {
    let sim = Sim::starting_at(img.clock);
    let ns = Rc::new(RefCell::new(Namespace::Zoned(img.device)));
    let stack = HostStack::new(sim.clone(), ns, IoEngine::IoUring, IoScheduler::MqDeadline)
        .map_err(|e| anyhow::anyhow!(e))?;
    Ok((sim, stack))
}

fn back_to_image(sim: &Sim, stack: &Rc<HostStack>) -> Image {
    let dev = stack.device().borrow();
    let Namespace::Zoned(d) = &*dev else {
        unreachable!("images hold zoned devices")
    };
    Image {
        clock: sim.now(),
        device: d.clone(),
    }
}

pub fn mkfs(a: MkfsArgs) -> Result<ExitCode> {
    let img = image::load(&a.image)?;
    let (sim, stack) = stack_for(img)?;
    let format = FormatOptions {
        segs_per_zone: a.segs_per_zone,
        ..Default::default()
    };
    let (s, st) = (sim.clone(), stack.clone());
    let res = sim
        .block_on(async move {
            let fs = Fs::mkfs(s, st, format, FsOptions::default(), Box::new(policy::F2fs)).await?;
            let sf = zonelab_lfs::FileSystem::statfs(&fs);
            fs.unmount().await?;
            Ok::<_, zonelab_lfs::FsError>(sf)
        })
        .context("simulation stalled")?;
    let sf = res.with_context(|| format!("mkfs {}", a.image.display()))?;
    image::save(&a.image, &back_to_image(&sim, &stack), true)?;
    println!(
        "{}: file system created, {} blocks of 4 KiB ({:.1} GiB) for files, {} inodes",
        a.image.display(),
        sf.blocks,
        sf.blocks as f64 * 4096.0 / (1u64 << 30) as f64,
        sf.files
    );
    Ok(ExitCode::SUCCESS)
}

/// Mounts a copy of the image's device (the image file is not changed) and checks it.
pub fn fsck(a: FsckArgs) -> Result<ExitCode> {
    let problems = check_image(&a.image)?;
    if a.json {
        println!(
            "{}",
            serde_json::json!({"image": a.image, "clean": problems.is_empty(), "problems": problems})
        );
    } else if problems.is_empty() {
        println!("{}: clean", a.image.display());
    } else {
        for p in &problems {
            println!("{p}");
        }
        println!("{}: {} problems", a.image.display(), problems.len());
    }
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(4)
    })
}

pub fn check_image(path: &Path) -> Result<Vec<String>> {
    let img = image::load(path)?;
    let (sim, stack) = stack_for(img)?;
    let s = sim.clone();
    let r = sim
        .block_on(async move {
            let fs = Fs::mount(s, stack, FsOptions::default(), Box::new(policy::F2fs)).await?;
            fs.check().await
        })
        .context("simulation stalled")?;
    match r {
        Ok(p) => Ok(p),
        Err(e) => bail!("{}: cannot mount: {e}", path.display()),
    }
}
