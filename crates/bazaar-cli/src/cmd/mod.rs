//! The `bazaar` subcommands, one module per family. Each family owns its
//! arguments (a clap `Subcommand` enum that `main` flattens into the top-level
//! command), runs them and prints prose or `--json`. `common` holds what every
//! family needs and knows none of them; `main` is the one place that lists them.

pub mod attack;
pub mod backup;
pub mod common;
pub mod demo;
pub mod escrow;
pub mod federation;
pub mod hire;
pub mod jobs;
pub mod labor;
pub mod members;
pub mod merchant;
pub mod payments;
pub mod registry;
pub mod reprice;
pub mod reputation;
pub mod storefront;
pub mod talk;
