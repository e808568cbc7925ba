//! The disk's model, without SQLite: files with live, durable and unsynced
//! bytes, directory entries, locks, and what a power cut leaves.

use crate::region::Region;
use rusqlite::ffi;
use std::collections::{BTreeMap, HashMap};
use std::ffi::c_int;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// The granularity a harsh cut tears writes at.
pub const SECTOR: u64 = 512;
/// `SQLITE_SHM_NLOCK`: the wal-index lock slots.
pub(crate) const SHM_LOCKS: usize = 8;

/// A small seeded generator (SplitMix64): replayable from its seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `percent` / 100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// What survives a power cut of the writes not yet synced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutMode {
    /// None of them: the durable image is exactly what was synced.
    Clean,
    /// Each sector of each unsynced write (and each unsynced truncate) is kept
    /// with the cut's probability, applied in order: a disk that reorders its
    /// cache and tears writes at sector boundaries.
    Harsh,
    /// All of them: the process died, the kernel and the disk did not, so
    /// everything written (synced or not) and every file created is there.
    ProcessCrash,
}

/// What `xSync` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syncs {
    /// A sync makes the file's writes durable.
    Honoured,
    /// A sync does nothing: as if SQLite never synced (`synchronous = OFF`).
    Ignored,
}

/// Which file an operation touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FileKind {
    Db,
    Wal,
    Journal,
    Other,
}

impl FileKind {
    pub(crate) fn of(name: &str) -> FileKind {
        if name.ends_with("-wal") {
            FileKind::Wal
        } else if name.ends_with("-journal") {
            FileKind::Journal
        } else if name.ends_with(".db") {
            FileKind::Db
        } else {
            FileKind::Other
        }
    }
}

/// A mutating operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpKind {
    Write,
    Truncate,
    Sync,
}

/// Which operations count towards the cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aim {
    /// Every mutating operation.
    Any,
    /// Only this kind of operation on this kind of file (say, a checkpoint's
    /// writes to the database file, or a commit's WAL sync).
    At(FileKind, OpKind),
}

impl Aim {
    fn matches(self, file: FileKind, op: OpKind) -> bool {
        match self {
            Aim::Any => true,
            Aim::At(f, o) => (f, o) == (file, op),
        }
    }
}

/// A cut waiting to happen.
pub(crate) struct Armed {
    aim: Aim,
    remaining: u64,
    mode: CutMode,
    rng: Rng,
}

/// Where the power was cut and what it threw away.
#[derive(Clone, Debug)]
pub struct CutReport {
    pub mode: CutMode,
    /// The operation the cut fell on (it did not happen); none for [`Volume::cut_now`].
    pub at: Option<(FileKind, OpKind)>,
    /// Mutating operations before the cut.
    pub ops_before: u64,
    /// Unsynced writes to the WAL at the cut: a commit was being written.
    pub wal_unsynced: usize,
    /// Unsynced writes to the database file at the cut: a checkpoint was copying pages.
    pub db_unsynced: usize,
    /// Unsynced writes (harsh mode) kept whole, torn (some sectors kept), dropped.
    pub kept: usize,
    pub torn: usize,
    pub dropped: usize,
    /// File name (no directory) → bytes that survived.
    pub image: BTreeMap<String, Vec<u8>>,
}

impl CutReport {
    /// Writes the surviving files into `dir`, as a disk would show them after reboot.
    pub fn write_image(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        for (name, bytes) in &self.image {
            std::fs::write(dir.join(name), bytes)?;
        }
        Ok(())
    }
}

/// Operations on the volume by kind, counted while it ran.
#[derive(Clone, Debug, Default)]
pub struct OpCounts(pub HashMap<(FileKind, OpKind), u64>);

impl OpCounts {
    pub fn get(&self, file: FileKind, op: OpKind) -> u64 {
        self.0.get(&(file, op)).copied().unwrap_or(0)
    }
}

pub(crate) enum Unsynced {
    Write { offset: u64, data: Vec<u8> },
    Truncate(u64),
}

pub(crate) fn write_at(bytes: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let (start, end) = (offset as usize, offset as usize + data.len());
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[start..end].copy_from_slice(data);
}

pub(crate) fn apply(bytes: &mut Vec<u8>, op: &Unsynced) {
    match op {
        Unsynced::Write { offset, data } => write_at(bytes, *offset, data),
        Unsynced::Truncate(size) => bytes.resize(*size as usize, 0),
    }
}

pub(crate) struct Node {
    pub(crate) kind: FileKind,
    /// What SQLite reads back.
    pub(crate) live: Vec<u8>,
    /// What survives a cut, if the entry does.
    pub(crate) durable: Vec<u8>,
    pub(crate) unsynced: Vec<Unsynced>,
    /// The directory entry survives a cut.
    pub(crate) entry_durable: bool,
    /// The first sync also syncs the directory (a new WAL or journal).
    pub(crate) dirsync_on_sync: bool,
    pub(crate) shared: u32,
    pub(crate) reserved: Option<u64>,
    pub(crate) pending: Option<u64>,
    pub(crate) exclusive: Option<u64>,
}

impl Node {
    pub(crate) fn new(kind: FileKind, dirsync_on_sync: bool) -> Node {
        Node {
            kind,
            live: Vec::new(),
            durable: Vec::new(),
            unsynced: Vec::new(),
            entry_durable: false,
            dirsync_on_sync,
            shared: 0,
            reserved: None,
            pending: None,
            exclusive: None,
        }
    }
}

#[derive(Default)]
pub(crate) struct Shm {
    pub(crate) regions: Vec<Region>,
    pub(crate) shared: [u32; SHM_LOCKS],
    pub(crate) exclusive: [Option<u64>; SHM_LOCKS],
    pub(crate) users: u32,
}

pub(crate) struct State {
    pub(crate) files: HashMap<String, Node>,
    /// Deleted without a directory sync: the durable bytes come back after a cut.
    pub(crate) ghosts: HashMap<String, Vec<u8>>,
    pub(crate) shm: HashMap<String, Shm>,
    pub(crate) syncs: Syncs,
    pub(crate) ops: u64,
    pub(crate) counts: OpCounts,
    pub(crate) armed: Option<Armed>,
    /// The next operation this matches fails, with the power on.
    pub(crate) failing: Option<Aim>,
    pub(crate) cut: Option<CutReport>,
}

/// One machine's disk.
pub struct Volume {
    pub(crate) name: String,
    pub(crate) state: Mutex<State>,
}

impl Volume {
    pub(crate) fn new(name: &str, syncs: Syncs) -> Volume {
        let state = State {
            files: HashMap::new(),
            ghosts: HashMap::new(),
            shm: HashMap::new(),
            syncs,
            ops: 0,
            counts: OpCounts::default(),
            armed: None,
            failing: None,
            cut: None,
        };
        Volume { name: name.to_string(), state: Mutex::new(state) }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The VFS path of `file` on this volume.
    pub fn path(&self, file: &str) -> PathBuf {
        PathBuf::from(format!("/{}/{file}", self.name))
    }

    /// Makes everything written so far durable, directory entries included
    /// (a machine that ran long enough for the OS to flush its caches).
    pub fn flush_all(&self) {
        let mut state = self.lock();
        for node in state.files.values_mut() {
            node.durable = node.live.clone();
            node.unsynced.clear();
            node.entry_durable = true;
            node.dirsync_on_sync = false;
        }
        state.ghosts.clear();
    }

    /// Cuts the power at the `after`-th mutating operation from now that `aim`
    /// matches (1 = the next one); `rng` decides what a harsh cut keeps.
    pub fn arm(&self, aim: Aim, after: u64, mode: CutMode, rng: Rng) {
        self.lock().armed = Some(Armed { aim, remaining: after.max(1), mode, rng });
    }

    /// Cuts the power now, between operations, unless it is already off.
    pub fn cut_now(&self, mode: CutMode, rng: Rng) {
        let mut state = self.lock();
        if state.cut.is_none() {
            state.armed = None;
            state.cut = Some(state.power_cut(mode, rng, None));
        }
    }

    /// Fails the next operation `aim` matches with an I/O error, the power
    /// staying on. A failed sync loses the file's unsynced writes for good
    /// (they stay readable, as in a page cache, until the power goes).
    pub fn fail_next(&self, aim: Aim) {
        self.lock().failing = Some(aim);
    }

    /// The cut, once it happened.
    pub fn cut(&self) -> Option<CutReport> {
        self.lock().cut.clone()
    }

    /// Mutating operations so far, by file and kind.
    pub fn counts(&self) -> OpCounts {
        self.lock().counts.clone()
    }
}

impl State {
    /// Counts a mutating operation on `name`; fails it if the power is (or now
    /// goes) off, or if it is the one [`Volume::fail_next`] aimed at.
    pub(crate) fn mutate(&mut self, name: &str, file: FileKind, op: OpKind) -> Result<(), c_int> {
        if self.cut.is_some() {
            return Err(ffi::SQLITE_IOERR);
        }
        self.ops += 1;
        *self.counts.0.entry((file, op)).or_default() += 1;
        if self.failing.is_some_and(|aim| aim.matches(file, op)) {
            self.failing = None;
            if op == OpKind::Sync {
                // As Linux does after a failed fsync: the pages are marked clean,
                // so what was not yet synced never reaches the disk.
                if let Some(node) = self.files.get_mut(name) {
                    node.unsynced.clear();
                }
            }
            return Err(ffi::SQLITE_IOERR);
        }
        let Some(armed) = &mut self.armed else { return Ok(()) };
        if armed.aim.matches(file, op) {
            armed.remaining -= 1;
        }
        if armed.remaining == 0 {
            let Armed { mode, rng, .. } = self.armed.take().expect("armed");
            self.cut = Some(self.power_cut(mode, rng, Some((file, op))));
            return Err(ffi::SQLITE_IOERR);
        }
        Ok(())
    }

    fn power_cut(&self, mode: CutMode, mut rng: Rng, at: Option<(FileKind, OpKind)>) -> CutReport {
        let unsynced =
            |kind: FileKind| self.files.values().filter(|n| n.kind == kind).map(|n| n.unsynced.len()).sum::<usize>();
        let mut report = CutReport {
            mode,
            at,
            ops_before: self.ops - u64::from(at.is_some()),
            wal_unsynced: unsynced(FileKind::Wal),
            db_unsynced: unsynced(FileKind::Db),
            kept: 0,
            torn: 0,
            dropped: 0,
            image: BTreeMap::new(),
        };
        // Each cut keeps sectors with its own probability, so some keep most and some few.
        let keep_percent = 10 + rng.below(81);
        let mut names: Vec<&String> = self.files.keys().chain(self.ghosts.keys()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let bytes = match self.files.get(name) {
                Some(node) if mode == CutMode::ProcessCrash => node.live.clone(),
                None if mode == CutMode::ProcessCrash => continue,
                Some(node) if node.entry_durable => {
                    let mut bytes = node.durable.clone();
                    if mode == CutMode::Harsh {
                        for op in &node.unsynced {
                            keep_some(&mut bytes, op, keep_percent, &mut rng, &mut report);
                        }
                    }
                    bytes
                }
                _ => match self.ghosts.get(name) {
                    Some(bytes) => bytes.clone(),
                    None => continue,
                },
            };
            report.image.insert(name.clone(), bytes);
        }
        report
    }
}

/// Applies the sectors of `op` that the dice keep to `bytes`.
fn keep_some(bytes: &mut Vec<u8>, op: &Unsynced, percent: u64, rng: &mut Rng, report: &mut CutReport) {
    let Unsynced::Write { offset, data } = op else {
        if rng.percent(percent) {
            apply(bytes, op);
            report.kept += 1;
        } else {
            report.dropped += 1;
        }
        return;
    };
    let (mut start, end, mut kept, mut pieces) = (*offset, offset + data.len() as u64, 0, 0);
    while start < end {
        let piece_end = ((start / SECTOR + 1) * SECTOR).min(end);
        pieces += 1;
        if rng.percent(percent) {
            kept += 1;
            let range = (start - offset) as usize..(piece_end - offset) as usize;
            write_at(bytes, start, &data[range]);
        }
        start = piece_end;
    }
    match kept {
        0 => report.dropped += 1,
        k if k == pieces => report.kept += 1,
        _ => report.torn += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seeds tried by the harsh-cut test.
    const SEEDS: u64 = 64;

    fn volume_with(name: &str, durable: &[u8], dirsync_on_sync: bool) -> Volume {
        let volume = Volume::new("v", Syncs::Honoured);
        let mut node = Node::new(FileKind::of(name), dirsync_on_sync);
        node.live = durable.to_vec();
        node.durable = durable.to_vec();
        node.entry_durable = true;
        volume.lock().files.insert(name.into(), node);
        volume
    }

    fn write(volume: &Volume, name: &str, offset: u64, data: &[u8]) {
        let mut state = volume.lock();
        state.mutate(name, FileKind::of(name), OpKind::Write).expect("power on");
        let node = state.files.get_mut(name).expect("file");
        write_at(&mut node.live, offset, data);
        node.unsynced.push(Unsynced::Write { offset, data: data.to_vec() });
    }

    fn cut_now(volume: &Volume, mode: CutMode, seed: u64) -> CutReport {
        let mut state = volume.lock();
        state.armed = Some(Armed { aim: Aim::Any, remaining: 1, mode, rng: Rng::new(seed) });
        assert!(state.mutate("a.db", FileKind::Db, OpKind::Sync).is_err(), "the cut fails the operation it falls on");
        assert!(state.mutate("a.db", FileKind::Db, OpKind::Write).is_err(), "and every one after");
        state.cut.clone().expect("cut")
    }

    #[test]
    fn a_clean_cut_keeps_exactly_what_was_synced() {
        let volume = volume_with("a.db", &[1; 1024], false);
        write(&volume, "a.db", 0, &[2; 512]);
        let cut = cut_now(&volume, CutMode::Clean, 1);
        assert_eq!(cut.image["a.db"], vec![1; 1024]);
        assert_eq!((cut.db_unsynced, cut.kept, cut.torn, cut.dropped), (1, 0, 0, 0));
    }

    #[test]
    fn a_harsh_cut_tears_only_between_sectors() {
        let old = vec![1u8; 4 * SECTOR as usize];
        let (mut torn, mut kept, mut dropped) = (0, 0, 0);
        for seed in 0..SEEDS {
            let volume = volume_with("a.db", &old, false);
            // Starts and ends mid-sector: the first and last pieces are partial sectors.
            write(&volume, "a.db", 100, &[2; 3 * SECTOR as usize]);
            let cut = cut_now(&volume, CutMode::Harsh, seed);
            let image = &cut.image["a.db"];
            assert_eq!(image.len(), old.len());
            for sector in image.chunks(SECTOR as usize) {
                let first = &sector[..100];
                let rest = &sector[100..];
                assert!(first.iter().all(|&b| b == first[0]) && rest.iter().all(|&b| b == rest[0]));
            }
            assert!(image[..100].iter().all(|&b| b == 1), "bytes no write covered stay as they were");
            (torn, kept, dropped) = (torn + cut.torn, kept + cut.kept, dropped + cut.dropped);
        }
        assert!(torn > 0 && kept > 0 && dropped > 0, "torn {torn}, kept {kept}, dropped {dropped}");
    }

    #[test]
    fn a_new_file_survives_only_once_its_directory_entry_is_synced() {
        let volume = Volume::new("v", Syncs::Honoured);
        volume.lock().files.insert("a.db-wal".into(), Node::new(FileKind::Wal, true));
        volume.lock().files.insert("b.db".into(), Node::new(FileKind::Db, false));
        for name in ["a.db-wal", "b.db"] {
            write(&volume, name, 0, b"frame");
            let mut state = volume.lock();
            let node = state.files.get_mut(name).expect("file");
            for op in node.unsynced.drain(..) {
                apply(&mut node.durable, &op);
            }
            node.entry_durable |= node.dirsync_on_sync;
        }
        let cut = cut_now(&volume, CutMode::Clean, 1);
        assert_eq!(
            cut.image.get("a.db-wal").map(Vec::as_slice),
            Some(&b"frame"[..]),
            "a WAL's first sync syncs its entry"
        );
        assert!(!cut.image.contains_key("b.db"), "a new database file needs a directory sync");
    }

    #[test]
    fn a_process_crash_keeps_everything_written() {
        let volume = volume_with("a.db", &[1; 16], false);
        volume.lock().files.insert("a.db-wal".into(), Node::new(FileKind::Wal, true));
        write(&volume, "a.db", 0, &[2; 8]);
        write(&volume, "a.db-wal", 0, b"frame");
        let cut = cut_now(&volume, CutMode::ProcessCrash, 1);
        assert_eq!(cut.image["a.db"], [[2; 8], [1; 8]].concat());
        assert_eq!(cut.image["a.db-wal"], b"frame");
    }

    #[test]
    fn syncs_that_are_ignored_keep_nothing() {
        let volume = volume_with("a.db", &[], false);
        volume.lock().syncs = Syncs::Ignored;
        write(&volume, "a.db", 0, b"acknowledged");
        let cut = cut_now(&volume, CutMode::Clean, 1);
        assert!(cut.image["a.db"].is_empty());
    }
}
