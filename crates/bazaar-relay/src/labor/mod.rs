//! The evaluated market, sans IO: how a worker binds its Nostr key to its
//! Bazaar identity (`enrollment`), declares and reviews its configuration
//! (`review`), what a coordination job's evidence chain is (`evidence`),
//! the three outcomes that never pretend (`outcome`), the rubrics that grade
//! (`judge`), and the records kept apart (`grades`). The worker and
//! validator runtimes (relay connections, fetching, engines) live in the CLI.

pub mod allowance;
pub mod enrollment;
pub mod evidence;
pub mod grades;
pub mod judge;
pub mod outcome;
pub mod review;

/// The coordination workflow the validator posts: deliver an approved script
/// through a specialist, as a text artifact whose bytes are checked.
pub const BRIEF_SCRIPT_DELIVERY: &str = "brief-script-delivery/v1";
