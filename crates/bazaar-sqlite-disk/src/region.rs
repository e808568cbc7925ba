//! One region of the in-memory wal-index (`-shm`): plain memory at a fixed
//! address for as long as the shm lives, which SQLite reads and writes directly.
#![allow(unsafe_code)]

/// One wal-index region, at a fixed address for as long as the shm lives.
pub(crate) struct Region(pub(crate) *mut u8, pub(crate) usize);
// SAFETY: the region is plain memory; SQLite coordinates its users with the
// shm locks and barriers, and Rust code never reads or writes it.
unsafe impl Send for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: made by `Box::into_raw` of a boxed slice of this length.
        unsafe { drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.0, self.1))) }
    }
}
