//! The SQLite VFS over the model: registration, the `sqlite3_vfs` and
//! `sqlite3_io_methods` callbacks, file locks and the wal-index.
#![allow(unsafe_code)]

use crate::model::{apply, write_at, FileKind, Node, OpKind, Shm, State, Syncs, Unsynced, Volume, SHM_LOCKS};
use crate::region::Region;
use rusqlite::ffi;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What the VFS tells SQLite its sector is (the unix VFS's default).
const SECTOR_SIZE_REPORTED: c_int = 4096;
/// Longest path SQLite may hand the VFS.
const PATHNAME_MAX: c_int = 512;

/// The VFS: its registered name and its volumes.
pub struct Disk {
    pub name: String,
    volumes: Mutex<HashMap<String, Arc<Volume>>>,
    default_vfs: usize,
    next_handle: AtomicU64,
}

impl Disk {
    /// Registers a new VFS named `name` (not the default one) for the life of the process.
    pub fn register(name: &str) -> &'static Disk {
        // SAFETY: sqlite3_vfs_find(NULL) initialises SQLite and returns the default VFS.
        let default_vfs = unsafe { ffi::sqlite3_vfs_find(std::ptr::null()) } as usize;
        assert!(default_vfs != 0, "SQLite has a default VFS");
        let disk: &'static Disk = Box::leak(Box::new(Disk {
            name: name.to_string(),
            volumes: Mutex::default(),
            default_vfs,
            next_handle: AtomicU64::new(1),
        }));
        let vfs = Box::leak(Box::new(ffi::sqlite3_vfs {
            iVersion: 2,
            szOsFile: std::mem::size_of::<Handle>() as c_int,
            mxPathname: PATHNAME_MAX,
            pNext: std::ptr::null_mut(),
            zName: CString::new(name).expect("a VFS name").into_raw(),
            pAppData: disk as *const Disk as *mut c_void,
            xOpen: Some(x_open),
            xDelete: Some(x_delete),
            xAccess: Some(x_access),
            xFullPathname: Some(x_full_pathname),
            xDlOpen: None,
            xDlError: None,
            xDlSym: None,
            xDlClose: None,
            xRandomness: Some(x_randomness),
            xSleep: Some(x_sleep),
            xCurrentTime: Some(x_current_time),
            xGetLastError: Some(x_get_last_error),
            xCurrentTimeInt64: Some(x_current_time_int64),
            xSetSystemCall: None,
            xGetSystemCall: None,
            xNextSystemCall: None,
        }));
        // SAFETY: `vfs` is leaked, so it outlives every connection that uses it.
        let rc = unsafe { ffi::sqlite3_vfs_register(vfs, 0) };
        assert_eq!(rc, ffi::SQLITE_OK, "register VFS {name}");
        disk
    }

    /// A new, empty volume named `name`.
    pub fn volume(&self, name: &str, syncs: Syncs) -> Arc<Volume> {
        let volume = Arc::new(Volume::new(name, syncs));
        let mut volumes = self.volumes.lock().unwrap_or_else(|p| p.into_inner());
        volumes.insert(name.to_string(), volume.clone());
        volume
    }

    /// Forgets a volume; handles still open on it keep it alive until closed.
    pub fn drop_volume(&self, name: &str) {
        self.volumes.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
    }

    fn resolve(&self, path: &str) -> Option<(Arc<Volume>, String)> {
        let (volume, file) = path.strip_prefix('/')?.split_once('/')?;
        let volumes = self.volumes.lock().unwrap_or_else(|p| p.into_inner());
        Some((volumes.get(volume)?.clone(), file.to_string()))
    }

    fn default_vfs(&self) -> *mut ffi::sqlite3_vfs {
        self.default_vfs as *mut ffi::sqlite3_vfs
    }
}

/// What `sqlite3_file` points at: SQLite allocates `szOsFile` bytes, the VFS fills them.
#[repr(C)]
struct Handle {
    base: ffi::sqlite3_file,
    inner: *mut Open,
}

/// An open file: on a volume, or an anonymous temporary one.
struct Open {
    id: u64,
    target: Target,
    /// SQLITE_LOCK_* held.
    lock: c_int,
    shm_shared: u8,
    shm_exclusive: u8,
    shm_mapped: bool,
}

enum Target {
    Volume { volume: Arc<Volume>, name: String },
    Temp(Vec<u8>),
}

unsafe fn disk<'a>(vfs: *mut ffi::sqlite3_vfs) -> &'a Disk {
    &*((*vfs).pAppData as *const Disk)
}

unsafe fn open_of<'a>(file: *mut ffi::sqlite3_file) -> &'a mut Open {
    &mut *(*(file as *mut Handle)).inner
}

unsafe fn c_path(name: *const c_char) -> Option<String> {
    if name.is_null() {
        return None;
    }
    CStr::from_ptr(name).to_str().ok().map(str::to_string)
}

unsafe extern "C" fn x_open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let disk = disk(vfs);
    (*file).pMethods = std::ptr::null();
    let target = match c_path(name) {
        Some(path) if flags & ffi::SQLITE_OPEN_DELETEONCLOSE == 0 => {
            let Some((volume, name)) = disk.resolve(&path) else { return ffi::SQLITE_CANTOPEN };
            let mut state = volume.lock();
            if !state.files.contains_key(&name) {
                if flags & ffi::SQLITE_OPEN_CREATE == 0 || state.cut.is_some() {
                    return ffi::SQLITE_CANTOPEN;
                }
                let journal = ffi::SQLITE_OPEN_WAL | ffi::SQLITE_OPEN_MAIN_JOURNAL | ffi::SQLITE_OPEN_SUPER_JOURNAL;
                state.files.insert(name.clone(), Node::new(FileKind::of(&name), flags & journal != 0));
            }
            drop(state);
            Target::Volume { volume, name }
        }
        _ => Target::Temp(Vec::new()),
    };
    let id = disk.next_handle.fetch_add(1, Ordering::Relaxed);
    let open = Box::new(Open { id, target, lock: 0, shm_shared: 0, shm_exclusive: 0, shm_mapped: false });
    std::ptr::write(
        file as *mut Handle,
        Handle { base: ffi::sqlite3_file { pMethods: &IO_METHODS }, inner: Box::into_raw(open) },
    );
    if !out_flags.is_null() {
        *out_flags = flags;
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_delete(vfs: *mut ffi::sqlite3_vfs, name: *const c_char, sync_dir: c_int) -> c_int {
    let Some((volume, name)) = c_path(name).and_then(|p| disk(vfs).resolve(&p)) else {
        return ffi::SQLITE_IOERR_DELETE_NOENT;
    };
    let mut state = volume.lock();
    if state.cut.is_some() {
        return ffi::SQLITE_IOERR_DELETE;
    }
    let Some(node) = state.files.remove(&name) else { return ffi::SQLITE_IOERR_DELETE_NOENT };
    if sync_dir != 0 {
        state.ghosts.remove(&name);
    } else if node.entry_durable {
        state.ghosts.insert(name, node.durable);
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_access(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    _flags: c_int,
    out: *mut c_int,
) -> c_int {
    let exists = c_path(name)
        .and_then(|p| disk(vfs).resolve(&p))
        .is_some_and(|(volume, name)| volume.lock().files.contains_key(&name));
    *out = c_int::from(exists);
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_full_pathname(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    n_out: c_int,
    out: *mut c_char,
) -> c_int {
    let bytes = CStr::from_ptr(name).to_bytes_with_nul();
    if bytes.len() > n_out as usize {
        return ffi::SQLITE_CANTOPEN;
    }
    std::ptr::copy_nonoverlapping(bytes.as_ptr() as *const c_char, out, bytes.len());
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_randomness(vfs: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) -> c_int {
    let default = disk(vfs).default_vfs();
    ((*default).xRandomness.expect("default xRandomness"))(default, n, out)
}

unsafe extern "C" fn x_sleep(vfs: *mut ffi::sqlite3_vfs, microseconds: c_int) -> c_int {
    let default = disk(vfs).default_vfs();
    ((*default).xSleep.expect("default xSleep"))(default, microseconds)
}

unsafe extern "C" fn x_current_time(vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    let default = disk(vfs).default_vfs();
    ((*default).xCurrentTime.expect("default xCurrentTime"))(default, out)
}

unsafe extern "C" fn x_current_time_int64(vfs: *mut ffi::sqlite3_vfs, out: *mut ffi::sqlite3_int64) -> c_int {
    let default = disk(vfs).default_vfs();
    ((*default).xCurrentTimeInt64.expect("default xCurrentTimeInt64"))(default, out)
}

unsafe extern "C" fn x_get_last_error(_vfs: *mut ffi::sqlite3_vfs, _n: c_int, _out: *mut c_char) -> c_int {
    0
}

static IO_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 2,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: None,
    xUnfetch: None,
};

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    x_unlock(file, ffi::SQLITE_LOCK_NONE);
    x_shm_unmap(file, 0);
    drop(Box::from_raw((*(file as *mut Handle)).inner));
    (*file).pMethods = std::ptr::null();
    ffi::SQLITE_OK
}

/// Runs `f` on the file's node, under the volume's lock, after counting `op`
/// (which may cut the power). Fails with `error` if the node is gone or the power is off.
fn with_node<T>(
    volume: &Volume,
    name: &str,
    error: c_int,
    op: Option<OpKind>,
    f: impl FnOnce(&mut State, &mut Node) -> T,
) -> Result<T, c_int> {
    let mut state = volume.lock();
    let kind = state.files.get(name).ok_or(error)?.kind;
    if state.cut.is_some() {
        return Err(error);
    }
    if let Some(op) = op {
        // Counted while the node is still in place, so a cut sees every file.
        state.mutate(name, kind, op).map_err(|_| error)?;
    }
    let mut node = state.files.remove(name).ok_or(error)?;
    let result = f(&mut state, &mut node);
    state.files.insert(name.to_string(), node);
    Ok(result)
}

fn code(result: Result<(), c_int>) -> c_int {
    result.err().unwrap_or(ffi::SQLITE_OK)
}

unsafe extern "C" fn x_read(file: *mut ffi::sqlite3_file, buf: *mut c_void, amt: c_int, offset: i64) -> c_int {
    let out = std::slice::from_raw_parts_mut(buf as *mut u8, amt as usize);
    let mut read = |bytes: &[u8]| {
        let start = (offset as usize).min(bytes.len());
        let n = (bytes.len() - start).min(out.len());
        out[..n].copy_from_slice(&bytes[start..start + n]);
        out[n..].fill(0);
        if n < out.len() {
            Err(ffi::SQLITE_IOERR_SHORT_READ)
        } else {
            Ok(())
        }
    };
    code(match &open_of(file).target {
        Target::Temp(bytes) => read(bytes),
        Target::Volume { volume, name, .. } => {
            with_node(volume, name, ffi::SQLITE_IOERR_READ, None, |_, node| read(&node.live)).and_then(|r| r)
        }
    })
}

unsafe extern "C" fn x_write(file: *mut ffi::sqlite3_file, buf: *const c_void, amt: c_int, offset: i64) -> c_int {
    let data = std::slice::from_raw_parts(buf as *const u8, amt as usize);
    code(match &mut open_of(file).target {
        Target::Temp(bytes) => {
            write_at(bytes, offset as u64, data);
            Ok(())
        }
        Target::Volume { volume, name, .. } => {
            with_node(volume, name, ffi::SQLITE_IOERR_WRITE, Some(OpKind::Write), |_, node| {
                write_at(&mut node.live, offset as u64, data);
                node.unsynced.push(Unsynced::Write { offset: offset as u64, data: data.to_vec() });
            })
        }
    })
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    code(match &mut open_of(file).target {
        Target::Temp(bytes) => {
            bytes.resize(size as usize, 0);
            Ok(())
        }
        Target::Volume { volume, name, .. } => {
            with_node(volume, name, ffi::SQLITE_IOERR_TRUNCATE, Some(OpKind::Truncate), |_, node| {
                node.live.resize(size as usize, 0);
                node.unsynced.push(Unsynced::Truncate(size as u64));
            })
        }
    })
}

unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    code(match &open_of(file).target {
        Target::Temp(_) => Ok(()),
        Target::Volume { volume, name, .. } => {
            with_node(volume, name, ffi::SQLITE_IOERR_FSYNC, Some(OpKind::Sync), |state, node| {
                if state.syncs == Syncs::Honoured {
                    for op in node.unsynced.drain(..) {
                        apply(&mut node.durable, &op);
                    }
                    if node.dirsync_on_sync {
                        node.dirsync_on_sync = false;
                        node.entry_durable = true;
                        state.ghosts.remove(name);
                    }
                }
            })
        }
    })
}

unsafe extern "C" fn x_file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    let found = match &open_of(file).target {
        Target::Temp(bytes) => Ok(bytes.len()),
        Target::Volume { volume, name, .. } => {
            with_node(volume, name, ffi::SQLITE_IOERR_FSTAT, None, |_, node| node.live.len())
        }
    };
    match found {
        Ok(len) => {
            *size = len as i64;
            ffi::SQLITE_OK
        }
        Err(code) => code,
    }
}

/// Runs `f` on the file's node and the handle, for locks; temp files lock trivially.
unsafe fn with_lock(file: *mut ffi::sqlite3_file, f: impl FnOnce(&mut Node, u64, &mut c_int) -> c_int) -> c_int {
    let open = open_of(file);
    let (id, lock) = (open.id, &mut open.lock);
    match &open.target {
        Target::Temp(_) => ffi::SQLITE_OK,
        Target::Volume { volume, name, .. } => {
            let mut state = volume.lock();
            match state.files.get_mut(name) {
                Some(node) => f(node, id, lock),
                None => ffi::SQLITE_OK,
            }
        }
    }
}

unsafe extern "C" fn x_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    with_lock(file, |node, id, held| {
        if *held >= level {
            return ffi::SQLITE_OK;
        }
        let others = |owner: Option<u64>| owner.is_some_and(|o| o != id);
        match level {
            ffi::SQLITE_LOCK_SHARED => {
                if others(node.pending) || others(node.exclusive) {
                    return ffi::SQLITE_BUSY;
                }
                node.shared += 1;
            }
            ffi::SQLITE_LOCK_RESERVED => {
                if others(node.reserved) || others(node.exclusive) {
                    return ffi::SQLITE_BUSY;
                }
                node.reserved = Some(id);
            }
            _ => {
                if others(node.pending) || others(node.exclusive) {
                    return ffi::SQLITE_BUSY;
                }
                node.pending = Some(id);
                let mine = u32::from(*held >= ffi::SQLITE_LOCK_SHARED);
                if node.shared > mine {
                    *held = ffi::SQLITE_LOCK_PENDING;
                    return ffi::SQLITE_BUSY;
                }
                node.exclusive = Some(id);
            }
        }
        *held = level;
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    with_lock(file, |node, id, held| {
        if *held <= level {
            return ffi::SQLITE_OK;
        }
        if *held >= ffi::SQLITE_LOCK_RESERVED {
            for owner in [&mut node.reserved, &mut node.pending, &mut node.exclusive] {
                if *owner == Some(id) {
                    *owner = None;
                }
            }
        }
        if level == ffi::SQLITE_LOCK_NONE && *held >= ffi::SQLITE_LOCK_SHARED {
            node.shared -= 1;
        }
        *held = level;
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    let mut reserved = false;
    let rc = with_lock(file, |node, _, _| {
        reserved = node.reserved.is_some() || node.pending.is_some() || node.exclusive.is_some();
        ffi::SQLITE_OK
    });
    *out = c_int::from(reserved);
    rc
}

unsafe extern "C" fn x_file_control(_file: *mut ffi::sqlite3_file, _op: c_int, _arg: *mut c_void) -> c_int {
    ffi::SQLITE_NOTFOUND
}

unsafe extern "C" fn x_sector_size(_file: *mut ffi::sqlite3_file) -> c_int {
    SECTOR_SIZE_REPORTED
}

unsafe extern "C" fn x_device_characteristics(_file: *mut ffi::sqlite3_file) -> c_int {
    // What the unix VFS reports by default: a write never damages bytes it does
    // not cover. The harsh cut keeps to that (it tears between sectors, never inside one).
    ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE
}

/// Runs `f` on the database's shm, under the volume's lock.
unsafe fn with_shm(file: *mut ffi::sqlite3_file, f: impl FnOnce(&mut Shm, &mut Open) -> c_int) -> c_int {
    let open = open_of(file);
    let Target::Volume { volume, name, .. } = &open.target else { return ffi::SQLITE_IOERR_SHMOPEN };
    let (volume, name) = (volume.clone(), name.clone());
    let mut state = volume.lock();
    let shm = state.shm.entry(name).or_default();
    f(shm, open)
}

unsafe extern "C" fn x_shm_map(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    with_shm(file, |shm, open| {
        if !open.shm_mapped {
            open.shm_mapped = true;
            shm.users += 1;
        }
        let region = region as usize;
        while shm.regions.len() <= region {
            if extend == 0 {
                *out = std::ptr::null_mut();
                return ffi::SQLITE_OK;
            }
            let bytes = vec![0u8; size as usize].into_boxed_slice();
            shm.regions.push(Region(Box::into_raw(bytes) as *mut u8, size as usize));
        }
        *out = shm.regions[region].0 as *mut c_void;
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_shm_lock(file: *mut ffi::sqlite3_file, offset: c_int, n: c_int, flags: c_int) -> c_int {
    with_shm(file, |shm, open| {
        let id = open.id;
        let slots = offset as usize..(offset + n) as usize;
        let bit = |slot: usize| 1u8 << slot;
        if flags & ffi::SQLITE_SHM_UNLOCK != 0 {
            for slot in slots {
                if open.shm_shared & bit(slot) != 0 {
                    shm.shared[slot] -= 1;
                }
                if open.shm_exclusive & bit(slot) != 0 {
                    shm.exclusive[slot] = None;
                }
                open.shm_shared &= !bit(slot);
                open.shm_exclusive &= !bit(slot);
            }
        } else if flags & ffi::SQLITE_SHM_SHARED != 0 {
            for slot in slots.clone() {
                if shm.exclusive[slot].is_some_and(|owner| owner != id) {
                    return ffi::SQLITE_BUSY;
                }
            }
            for slot in slots {
                if open.shm_shared & bit(slot) == 0 {
                    shm.shared[slot] += 1;
                    open.shm_shared |= bit(slot);
                }
            }
        } else {
            for slot in slots.clone() {
                let mine = u32::from(open.shm_shared & bit(slot) != 0);
                if shm.exclusive[slot].is_some_and(|owner| owner != id) || shm.shared[slot] > mine {
                    return ffi::SQLITE_BUSY;
                }
            }
            for slot in slots {
                shm.exclusive[slot] = Some(id);
                open.shm_exclusive |= bit(slot);
            }
        }
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_shm_barrier(_file: *mut ffi::sqlite3_file) {
    std::sync::atomic::fence(Ordering::SeqCst);
}

unsafe extern "C" fn x_shm_unmap(file: *mut ffi::sqlite3_file, _delete: c_int) -> c_int {
    let open = open_of(file);
    if !open.shm_mapped {
        return ffi::SQLITE_OK;
    }
    x_shm_lock(file, 0, SHM_LOCKS as c_int, ffi::SQLITE_SHM_UNLOCK);
    let open = open_of(file);
    open.shm_mapped = false;
    let Target::Volume { volume, name, .. } = &open.target else { return ffi::SQLITE_OK };
    let mut state = volume.lock();
    let last = state.shm.get_mut(name).map(|shm| {
        shm.users -= 1;
        shm.users == 0
    });
    if last == Some(true) {
        // Nobody maps it any more: the memory goes, as the wal-index would with the machine.
        state.shm.remove(name);
    }
    ffi::SQLITE_OK
}
