//! The conversation plane over HTTP: rooms and DMs, membership, posting and
//! history (`rest`), the poll inbox and the two live transports on one cursor
//! (`stream`), sealing keys and message signatures (`sealing`), registry notifications into inboxes (`notices`), webhooks (`webhooks`: routes, the sender, target checks), over the plane's own store (`crate::plane`, beneath `state`). The plane is the
//! `bazaar-conversation` crate; nothing here touches the money writer.

pub mod bodies;
pub mod meter;
pub mod notices;
pub mod rest;
pub mod sealing;
pub mod stream;
pub mod webhooks;

pub use crate::plane::{Plane, SharedStore, Transport};

use crate::state::AppState;
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;

/// The plane's routes, each with its OpenAPI entry.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    rest::routes()
        .merge(bodies::routes())
        .merge(meter::routes())
        .merge(sealing::routes())
        .merge(stream::routes())
        .merge(webhooks::routes())
}
