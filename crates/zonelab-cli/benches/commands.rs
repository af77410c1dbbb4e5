//! Criterion benchmark of simulated commands per wall-clock second on the zn540 profile: the
//! same two cases as `zonelab bench`, with fewer commands per iteration, and many fio writers
//! contending for open zones.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::cell::RefCell;
use std::rc::Rc;
use zonelab_device::{Namespace, PayloadMode, Profile, ZonedDevice};
use zonelab_workload::fio::options;
use zonelab_workload::fio::run::{self, RunSettings};

const COMMANDS: u64 = 100_000;

fn jobs(args: &[String]) -> Vec<options::JobSpec> {
    options::parse_cli(args, &|p| std::fs::read_to_string(p))
        .expect("benchmark job parses")
        .jobs
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn device() -> Rc<RefCell<Namespace>> {
    let p = Profile::load("zn540", &[]).expect("zn540 profile");
    Rc::new(RefCell::new(Namespace::from(
        ZonedDevice::new(p, PayloadMode::Fingerprint).expect("device"),
    )))
}

fn bench(c: &mut Criterion) {
    let settings = RunSettings::default();
    let zone = Profile::load("zn540", &[]).unwrap().zns.zone_size.0;
    let mut g = c.benchmark_group("zn540");
    g.throughput(Throughput::Elements(COMMANDS));
    g.sample_size(10);

    let write = jobs(&args(&[
        "--name=w",
        "--rw=write",
        "--bs=4k",
        "--zonemode=zbd",
        &format!("--size={zone}"),
        &format!("--number_ios={COMMANDS}"),
    ]));
    g.bench_function("qd1-4k-seqwrite-1zone", |b| {
        b.iter(|| run::run_on(&write, device(), &settings).expect("run"))
    });

    let span = 16 * zone;
    let filled = device();
    let fill = jobs(&args(&[
        "--name=fill",
        "--rw=write",
        "--bs=512k",
        "--iodepth=4",
        "--zonemode=zbd",
        &format!("--size={span}"),
    ]));
    run::run_on(&fill, filled.clone(), &settings).expect("fill");
    let read = jobs(&args(&[
        "--name=r",
        "--rw=randread",
        "--bs=4k",
        "--iodepth=32",
        "--zonemode=zbd",
        &format!("--size={span}"),
        &format!("--number_ios={COMMANDS}"),
    ]));
    g.bench_function("qd32-4k-randread-16zones", |b| {
        b.iter(|| run::run_on(&read, filled.clone(), &settings).expect("run"))
    });
    g.finish();

    // Many writers sharing a few zones under the open-zone limit: most threads wait for a zone
    // at any moment, so this measures what waiting costs (it used to poll every microsecond).
    const WRITERS: u64 = 1024;
    const PER_WRITER: u64 = 8 << 20;
    const BS: u64 = 64 << 10;
    let mut g = c.benchmark_group("zn540-contended");
    g.throughput(Throughput::Elements(WRITERS * PER_WRITER / BS));
    g.sample_size(10);
    let shared = jobs(&args(&[
        "--name=w",
        "--rw=write",
        &format!("--bs={BS}"),
        "--zonemode=zbd",
        &format!("--numjobs={WRITERS}"),
        &format!("--size={}", 4 * zone),
        &format!("--io_size={PER_WRITER}"),
    ]));
    g.bench_function("1024-writers-64k-4zones", |b| {
        b.iter(|| run::run_on(&shared, device(), &settings).expect("run"))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
