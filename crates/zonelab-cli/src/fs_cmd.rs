//! `zonelab mkfs` and `zonelab fsck`: the file system on a device image (see `zonelab zns
//! create`). The metadata lives on conventional zones of the image's zoned device, or with
//! `--companion` on a companion conventional device image (`zonelab zns create --profile
//! sn640`), as F2FS on ZNS drives without conventional zones (mkfs.f2fs -c).

use crate::image::{self, AnyImage, ConventionalImage, Image};
use anyhow::{Context, Result, bail};
use clap::Args;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use zonelab_device::{HostStack, IoEngine, IoScheduler, Namespace};
use zonelab_lfs::FsError;
use zonelab_lfs::dev::Devices;
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
    /// Companion conventional device image for the metadata (created by `zonelab zns create
    /// IMAGE --profile sn640-op28`); the zoned device then needs no conventional zones.
    #[arg(long, value_name = "IMAGE")]
    companion: Option<PathBuf>,
    /// Format even if the device already holds a file system (erasing every file on it).
    #[arg(long)]
    force: bool,
}

#[derive(Args, Debug)]
pub struct FsckArgs {
    /// Device image holding a file system.
    image: PathBuf,
    /// The companion conventional device image the file system was formatted with.
    #[arg(long, value_name = "IMAGE")]
    companion: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// The images' devices behind the kernel I/O path F2FS uses on zoned drives, on one simulation
/// continuing the later of the images' clocks.
pub(crate) struct Stacks {
    pub sim: Sim,
    pub zoned: Rc<HostStack>,
    pub companion: Option<Rc<HostStack>>,
}

impl Stacks {
    pub fn devices(&self) -> Devices {
        match &self.companion {
            Some(c) => Devices::with_companion(self.zoned.clone(), c.clone()),
            None => Devices::from(self.zoned.clone()),
        }
    }
}

/// Loads the companion image: a conventional-namespace image.
pub(crate) fn load_companion(path: &Path) -> Result<ConventionalImage> {
    match image::load_any(path).context("--companion")? {
        AnyImage::Conventional(c) => Ok(c),
        AnyImage::Zoned(_) => bail!(
            "--companion {}: this is a zoned device image; the companion must be a conventional one, e.g. `zonelab zns create meta.img --profile sn640-op28 --set blocks_per_plane=16 --set pages_per_block=64`",
            path.display()
        ),
    }
}

pub(crate) fn stacks_for(img: Image, companion: Option<ConventionalImage>) -> Result<Stacks> {
    let clock = companion
        .as_ref()
        .map_or(img.clock, |c| c.clock.max(img.clock));
    let sim = Sim::starting_at(clock);
    let stack = |ns: Namespace| {
        HostStack::new(
            sim.clone(),
            Rc::new(RefCell::new(ns)),
            IoEngine::IoUring,
            IoScheduler::MqDeadline,
        )
        .map_err(|e| anyhow::anyhow!(e))
    };
    let zoned = stack(Namespace::Zoned(img.device))?;
    let companion = match companion {
        Some(c) => Some(stack(Namespace::Conventional(c.device))?),
        None => None,
    };
    Ok(Stacks {
        sim,
        zoned,
        companion,
    })
}

pub(crate) fn back_to_image(sim: &Sim, stack: &Rc<HostStack>) -> Image {
    let dev = stack.device().borrow();
    let Namespace::Zoned(d) = &*dev else {
        unreachable!("images hold zoned devices")
    };
    Image {
        clock: sim.now(),
        device: d.clone(),
    }
}

pub(crate) fn back_to_companion(sim: &Sim, stack: &Rc<HostStack>) -> ConventionalImage {
    let dev = stack.device().borrow();
    let Namespace::Conventional(d) = &*dev else {
        unreachable!("companions are conventional devices")
    };
    ConventionalImage {
        clock: sim.now(),
        device: d.clone(),
    }
}

pub fn mkfs(a: MkfsArgs) -> Result<ExitCode> {
    let img = image::load(&a.image)?;
    let companion = a.companion.as_deref().map(load_companion).transpose()?;
    let stacks = stacks_for(img, companion)?;
    let sim = stacks.sim.clone();
    let format = FormatOptions {
        segs_per_zone: a.segs_per_zone,
        ..Default::default()
    };
    if !a.force {
        let (s, devs) = (sim.clone(), stacks.devices());
        let exists = sim
            .block_on(Fs::exists_on(s, devs))
            .context("simulation stalled")?;
        if exists.with_context(|| format!("mkfs {}", a.image.display()))? {
            bail!(
                "{} already holds a file system (its superblock is intact); formatting erases every file on it. Pass --force to format anyway, or check it with `zonelab fsck {}`",
                a.image.display(),
                a.image.display()
            );
        }
    }
    let (s, devs) = (sim.clone(), stacks.devices());
    let res = sim
        .block_on(async move {
            let fs = Fs::mkfs(
                s,
                devs,
                format,
                FsOptions::default(),
                Box::new(policy::F2fs),
            )
            .await?;
            let sf = zonelab_lfs::FileSystem::statfs(&fs);
            fs.unmount().await?;
            Ok::<_, zonelab_lfs::FsError>(sf)
        })
        .context("simulation stalled")?;
    let sf = res.with_context(|| format!("mkfs {}", a.image.display()))?;
    if let (Some(path), Some(c)) = (&a.companion, &stacks.companion) {
        image::save_conventional(path, &back_to_companion(&sim, c), true)?;
    }
    image::save(&a.image, &back_to_image(&sim, &stacks.zoned), true)?;
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
    let problems = check_image(&a.image, a.companion.as_deref())?;
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

pub fn check_image(path: &Path, companion: Option<&Path>) -> Result<Vec<String>> {
    let img = image::load(path)?;
    let companion = companion.map(load_companion).transpose()?;
    let stacks = stacks_for(img, companion)?;
    let sim = stacks.sim.clone();
    let (s, devs) = (sim.clone(), stacks.devices());
    let r = sim
        .block_on(async move {
            let fs = Fs::mount(s, devs, FsOptions::default(), Box::new(policy::F2fs)).await?;
            fs.check_at_rest().await
        })
        .context("simulation stalled")?;
    match r {
        Ok(p) => Ok(p),
        // Damage that keeps it from mounting is a finding of the check (exit 4, and in the
        // JSON); a wrong request (a missing or wrong companion) is not.
        Err(e @ (FsError::Corrupt(_) | FsError::Io(_))) => Ok(vec![format!("cannot mount: {e}")]),
        Err(e) => bail!("{}: cannot mount: {e}", path.display()),
    }
}
