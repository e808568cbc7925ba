//! A disk with a volatile write cache, as a SQLite VFS: writes land in a
//! per-file list of unsynced writes, `xSync` makes them durable, and a power
//! cut keeps only what was synced (or, in the harsh mode, a random subset of
//! the unsynced writes, sector by sector: torn and reordered).
//!
//! Everything lives in memory. A path is `/<volume>/<file>`; each volume is one
//! machine's disk and is cut on its own, after a chosen number of mutating
//! operations (writes, truncates, syncs). From the cut on, every read, write,
//! truncate and sync on it fails, so nothing can be acknowledged afterwards.
//! The durable image at the cut is kept for recovery, to be written to real
//! files and opened with the normal SQLite path.
//!
//! Directory entries are durable as on Linux with SQLite's unix VFS: a new
//! WAL or journal becomes durable at its first sync (the unix VFS fsyncs the
//! directory then); any other new file only by [`Volume::flush_all`]. A delete
//! without `syncDir` brings the old durable file back after a cut. The `-shm`
//! wal-index is memory only (it is volatile on a real machine too and SQLite
//! rebuilds it from the WAL on recovery); its locks are real, shared by every
//! connection of the process.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! test-only: a SQLite VFS modelling a disk with a
//! volatile write cache (durable = fsynced), with power cuts clean, torn or as
//! a process crash; the embedded store's power-loss test runs on it. The only
//! crate with `unsafe` (a C interface), allowed in its `vfs` and `region`
//! modules alone.

//!
//! For tests only: it is how `bazaar-store-sqlite`'s power-loss test backs the
//! claim that an acknowledged commit survives a power cut. The unsafe code is
//! the VFS's C interface (`vfs`) and the wal-index memory (`region`).

#![deny(unsafe_code)]

mod model;
mod region;
mod vfs;

pub use model::{Aim, CutMode, CutReport, FileKind, OpCounts, OpKind, Rng, Syncs, Volume, SECTOR};
pub use vfs::Disk;
