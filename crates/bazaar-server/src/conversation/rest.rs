//! Rooms, DMs, membership, posting, history, the poll inbox and attention as
//! REST routes. Every refusal is the store's own code (see `plane::problem`).

use super::sealing::check_post_signature;
use crate::auth::{ApiJson, ApiQuery, Auth, Talker};
use crate::exec::resolve;
use crate::plane::Transport;
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_conversation::compose::check_body;
use bazaar_conversation::mentions::mentioned_handles;
use bazaar_conversation::sealing::{Content, SealedBody};
use bazaar_conversation::{
    Change, ChangeKind, ChannelId, ConversationError, HandleBook, HistoryRange, Membership, NewMessage, NewRoom, Role,
};
use bazaar_core::model::{Member, MemberKind};
use bazaar_types::limits::{IDEMPOTENCY_KEY_LEN_MAX, MESSAGE_MENTION_CANDIDATES_MAX};
use bazaar_wire::conversation as schema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Messages a history page or an inbox page returns when `limit` is not given.
pub const PAGE_DEFAULT: usize = 50;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(create_room, list_rooms))
        .routes(routes!(open_dm))
        .routes(routes!(my_channels))
        .routes(routes!(get_channel))
        .routes(routes!(join))
        .routes(routes!(leave))
        .routes(routes!(add_member))
        .routes(routes!(remove_member))
        .routes(routes!(set_role))
        .routes(routes!(edit_message, delete_message))
        .routes(routes!(react))
        .routes(routes!(set_muted))
        .routes(routes!(mark_read))
        .routes(routes!(post_message, history))
        .routes(routes!(inbox))
        .routes(routes!(attention))
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRoomRequest {
    /// 1 to 64 bytes.
    pub name: String,
    /// A private room takes members only from its owners; a public one anyone may join.
    #[serde(default)]
    pub private: bool,
    /// Ask for a sealed private room: sealed if the caller has published a
    /// sealing key, else born plaintext with a line saying why.
    #[serde(default)]
    pub sealed: bool,
}

/// Creates a room; the caller becomes its owner and first member.
#[utoipa::path(post, path = "/v1/rooms", request_body = CreateRoomRequest, security(("credential" = []), ("session" = [])), responses((status = 201, description = "The room", body = schema::Channel)))]
async fn create_room(
    State(state): State<Arc<AppState>>,
    Talker(auth): Talker,
    ApiJson(body): ApiJson<CreateRoomRequest>,
) -> Result<Response, Problem> {
    let plane = state.plane()?;
    let room = NewRoom { owner: auth.member.id, name: body.name, private: body.private, sealed: body.sealed };
    let channel = plane.call(move |store| store.create_room(room)).await?;
    plane.memberships_changed([&channel.created_by]);
    Ok((StatusCode::CREATED, Json(channel)).into_response())
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoomsQuery {
    /// The last room id of the previous page.
    pub after: Option<String>,
    pub limit: Option<usize>,
}

/// Public rooms, by id, to find one to join.
#[utoipa::path(get, path = "/v1/rooms", params(("after" = Option<String>, Query), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Public rooms", body = [schema::Channel])))]
async fn list_rooms(
    State(state): State<Arc<AppState>>,
    _auth: Auth,
    ApiQuery(query): ApiQuery<RoomsQuery>,
) -> Result<Response, Problem> {
    let after = query.after.map(ChannelId);
    let limit = query.limit.unwrap_or(PAGE_DEFAULT);
    let rooms = state.plane()?.call(move |store| store.public_rooms(after.as_ref(), limit)).await?;
    Ok(Json(rooms).into_response())
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenDmRequest {
    /// The other member: a DID or a current handle.
    pub with: String,
}

/// The caller's DM with another member, created on first use (the same
/// channel whichever of the two opens it).
#[utoipa::path(post, path = "/v1/dms", request_body = OpenDmRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "The DM", body = schema::Channel)))]
async fn open_dm(
    State(state): State<Arc<AppState>>,
    Talker(auth): Talker,
    ApiJson(body): ApiJson<OpenDmRequest>,
) -> Result<Response, Problem> {
    let plane = state.plane()?;
    let other = resolve(&state, &body.with).await?.id;
    let me = auth.member.id;
    let (one, two) = (me.clone(), other.clone());
    let channel = plane.call(move |store| store.open_dm(&one, &two)).await?;
    plane.memberships_changed([&me, &other]);
    Ok(Json(channel).into_response())
}

/// One channel the caller is in now, with what needs its attention there.
#[derive(Serialize)]
struct MyChannel {
    #[serde(flatten)]
    membership: Membership,
    unread: u64,
    wakes: u64,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AsQuery {
    /// An agent of the caller (DID or handle): read as that agent (owners watch their agents' rooms).
    #[serde(rename = "as")]
    pub as_agent: Option<String>,
}

/// Whose channels a read is for: the caller's own, or (with `as`) an agent
/// the caller owns — owners may read, never post, where their agents are.
async fn reader(state: &AppState, auth: &Auth, as_agent: Option<&str>) -> Result<bazaar_types::MemberId, Problem> {
    let Some(agent) = as_agent else { return Ok(auth.member.id.clone()) };
    let agent = resolve(state, agent).await?;
    if agent.kind != MemberKind::Agent || agent.owner.as_ref() != Some(&auth.member.id) {
        return Err(Problem::new(
            StatusCode::FORBIDDEN,
            "not_owner",
            format!("Only {}'s owner may read as it.", agent.handle),
        ));
    }
    Ok(agent.id)
}

/// The channels the caller is in now (or, with `as`, one of its agents is),
/// each with its unread and waking counts (derived when asked, never stored).
#[utoipa::path(get, path = "/v1/channels", params(("as" = Option<String>, Query, description = "An agent of the caller: its channels")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The caller's channels", body = [schema::MyChannel])))]
async fn my_channels(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<AsQuery>,
) -> Result<Response, Problem> {
    let me = reader(&state, &auth, query.as_agent.as_deref()).await?;
    let (stints, attention) = state
        .plane()?
        .call(move |store| {
            let stints = store.memberships_of(&me)?;
            Ok((stints, store.attention(&me)?))
        })
        .await?;
    let mine: Vec<MyChannel> = stints
        .into_iter()
        .filter(Membership::is_current)
        .map(|membership| {
            let here = attention.iter().find(|a| a.channel == membership.channel);
            let (unread, wakes) = here.map(|a| (a.unread, a.wakes)).unwrap_or((0, 0));
            MyChannel { membership, unread, wakes }
        })
        .collect();
    Ok(Json(mine).into_response())
}

/// A member of a channel as its member list shows it.
#[derive(Serialize)]
struct ListedMember {
    #[serde(flatten)]
    membership: Membership,
    /// The live transports it listens on now; empty when it only polls (or is away).
    listening: Vec<Transport>,
}

/// A channel and its members, each with the transports it listens on. Anyone
/// may read a public room; a private room or a DM only its members.
#[utoipa::path(get, path = "/v1/channels/{channel}", params(("channel" = String, Path)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The channel and its members", body = schema::ChannelView)))]
async fn get_channel(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(channel): Path<String>,
) -> Result<Response, Problem> {
    let plane = state.plane()?;
    let (me, channel) = (auth.member.id, ChannelId(channel));
    let (view, hooked) = plane
        .call(move |store| {
            let view = store.channel(&channel, &me)?;
            let mut hooked = Vec::new();
            for membership in &view.members {
                let endpoints = store.webhooks(&membership.member)?;
                hooked.push(endpoints.iter().any(|e| e.disabled_at.is_none()));
            }
            Ok((view, hooked))
        })
        .await?;
    let members: Vec<ListedMember> = view
        .members
        .into_iter()
        .zip(hooked)
        .map(|(membership, hooked)| {
            let mut listening = plane.transports_of(&membership.member);
            if hooked {
                listening.push(Transport::Webhook);
            }
            ListedMember { membership, listening }
        })
        .collect();
    let mut body = serde_json::to_value(&view.channel).map_err(internal)?;
    body["members"] = serde_json::to_value(members).map_err(internal)?;
    Ok(Json(body).into_response())
}

/// After a membership act: the member's streams reload their stints, and
/// every stream wakes to the system line at `line` (not kept in memory, so
/// each reads it from the store). A join's line comes right after the stint
/// opens; a leave's or removal's closes it; a role change's position is not
/// returned, so that line reaches streams at their next wake.
fn changed(state: &AppState, stint: &Membership, line: Option<u64>) -> Result<(), Problem> {
    let plane = state.plane()?;
    plane.memberships_changed([&stint.member]);
    if let Some(position) = line {
        plane.advanced_in(&stint.channel, position);
    }
    Ok(())
}

fn internal(error: serde_json::Error) -> Problem {
    Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", error.to_string())
}

/// Joins a public room (a private room is joined only by being added).
#[utoipa::path(post, path = "/v1/channels/{channel}/join", params(("channel" = String, Path)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The new membership", body = schema::Membership)))]
async fn join(
    State(state): State<Arc<AppState>>,
    Talker(auth): Talker,
    Path(channel): Path<String>,
) -> Result<Response, Problem> {
    let (me, channel) = (auth.member.id, ChannelId(channel));
    let stint = state.plane()?.call(move |store| store.join(&channel, &me)).await?;
    changed(&state, &stint, Some(stint.joined_after + 1))?;
    Ok(Json(stint).into_response())
}

/// Leaves a room: nothing posted after it is delivered to the caller.
#[utoipa::path(post, path = "/v1/channels/{channel}/leave", params(("channel" = String, Path)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The closed membership", body = schema::Membership)))]
async fn leave(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(channel): Path<String>,
) -> Result<Response, Problem> {
    let (me, channel) = (auth.member.id, ChannelId(channel));
    let stint = state.plane()?.call(move |store| store.leave(&channel, &me)).await?;
    changed(&state, &stint, stint.left_after)?;
    Ok(Json(stint).into_response())
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddMemberRequest {
    /// A DID or a current handle.
    pub member: String,
}

/// An owner of a room adds a member (the only way into a private room).
#[utoipa::path(post, path = "/v1/channels/{channel}/members", params(("channel" = String, Path)), request_body = AddMemberRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "The new membership", body = schema::Membership)))]
async fn add_member(
    State(state): State<Arc<AppState>>,
    Talker(auth): Talker,
    Path(channel): Path<String>,
    ApiJson(body): ApiJson<AddMemberRequest>,
) -> Result<Response, Problem> {
    let member = resolve(&state, &body.member).await?.id;
    let (me, channel) = (auth.member.id, ChannelId(channel));
    let stint = state.plane()?.call(move |store| store.add_member(&channel, &me, &member)).await?;
    changed(&state, &stint, Some(stint.joined_after + 1))?;
    Ok(Json(stint).into_response())
}

/// An owner removes another member from a room; nothing posted after reaches it.
#[utoipa::path(delete, path = "/v1/channels/{channel}/members/{member}", params(("channel" = String, Path), ("member" = String, Path, description = "DID or handle")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The closed membership", body = schema::Membership)))]
async fn remove_member(
    State(state): State<Arc<AppState>>,
    Talker(auth): Talker,
    Path((channel, member)): Path<(String, String)>,
) -> Result<Response, Problem> {
    let member = resolve(&state, &member).await?.id;
    let (me, channel) = (auth.member.id, ChannelId(channel));
    let stint = state.plane()?.call(move |store| store.remove_member(&channel, &me, &member)).await?;
    changed(&state, &stint, stint.left_after)?;
    Ok(Json(stint).into_response())
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleRequest {
    /// `owner` or `member`.
    pub role: String,
}

/// An owner makes a member an owner, or an owner a member; a room is never
/// left without an owner while others are in it (`last_owner`).
#[utoipa::path(put, path = "/v1/channels/{channel}/members/{member}/role", params(("channel" = String, Path), ("member" = String, Path, description = "DID or handle")), request_body = RoleRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "The membership", body = schema::Membership)))]
async fn set_role(
    State(state): State<Arc<AppState>>,
    Talker(auth): Talker,
    Path((channel, member)): Path<(String, String)>,
    ApiJson(body): ApiJson<RoleRequest>,
) -> Result<Response, Problem> {
    let role = Role::parse(&body.role).ok_or_else(|| Problem::invalid("`role` is `owner` or `member`."))?;
    let member = resolve(&state, &member).await?.id;
    let (me, channel) = (auth.member.id, ChannelId(channel));
    let stint = state.plane()?.call(move |store| store.set_role(&channel, &me, &member, role)).await?;
    changed(&state, &stint, None)?;
    Ok(Json(stint).into_response())
}

/// Posts a change to message `seq` as a message of its own; 201 with it.
async fn post_change(
    state: &AppState,
    auth: Auth,
    channel: String,
    target: u64,
    what: ChangeKind,
) -> Result<Response, Problem> {
    let plane = state.plane()?;
    let body = match &what {
        ChangeKind::Edit { body } => body.clone(),
        _ => String::new(),
    };
    let listed = match &what {
        ChangeKind::SealedEdit { mentions, .. } => mentions.clone(),
        _ => Vec::new(),
    };
    let book = handle_book(state, &auth.member, &body, &listed).await?;
    let change = Change {
        channel: ChannelId(channel),
        on_behalf_of: speaks_for(&auth.member),
        author: auth.member.id,
        target,
        what,
    };
    let message = plane.call(move |store| store.change(&book, change)).await?;
    plane.published(&message);
    Ok((StatusCode::CREATED, Json(message)).into_response())
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EditRequest {
    /// The new text (1 to 4,096 bytes); the original stays in history. Empty with `sealed`.
    #[serde(default)]
    pub body: String,
    /// In a sealed channel, the new text sealed like a post (`docs/sealing.md`).
    #[schema(value_type = Option<Object>)]
    pub sealed: Option<SealedBody>,
    /// The author's signature over the sealed edit (required with `sealed`).
    pub signature: Option<String>,
    /// Handles the sealed text mentions.
    #[serde(default)]
    pub mentions: Vec<String>,
}

/// Its author gives a text message new text, posted as an `edit` message.
#[utoipa::path(patch, path = "/v1/channels/{channel}/messages/{seq}", params(("channel" = String, Path), ("seq" = u64, Path)), request_body = EditRequest, security(("credential" = []), ("session" = [])), responses((status = 201, description = "The edit, a message of its own", body = schema::Message)))]
async fn edit_message(
    State(state): State<Arc<AppState>>,
    Talker(auth): Talker,
    Path((channel, seq)): Path<(String, u64)>,
    ApiJson(body): ApiJson<EditRequest>,
) -> Result<Response, Problem> {
    let what = match (body.sealed, body.signature) {
        (None, None) => ChangeKind::Edit { body: body.body },
        (None, Some(_)) => {
            return Err(Problem::invalid("A plaintext edit carries no `signature`; only a sealed one does."))
        }
        (Some(_), None) => return Err(crate::plane::problem(ConversationError::SignatureRequired)),
        (Some(sealed), Some(signature)) => {
            if !body.body.is_empty() {
                let refused = ConversationError::SealedInvalid("a sealed edit carries no plaintext body".into());
                return Err(crate::plane::problem(refused));
            }
            let id = ChannelId(channel.clone());
            check_post_signature(&id, &auth.member.id, &Content::Sealed(&sealed), Some(&signature))?;
            ChangeKind::SealedEdit { sealed, signature, mentions: body.mentions }
        }
    };
    post_change(&state, auth, channel, seq, what).await
}

/// Its author or an owner of the room withdraws a text message, posted as a
/// `deletion` message (the original stays in history, marked).
#[utoipa::path(delete, path = "/v1/channels/{channel}/messages/{seq}", params(("channel" = String, Path), ("seq" = u64, Path)), security(("credential" = []), ("session" = [])), responses((status = 201, description = "The deletion, a message of its own", body = schema::Message)))]
async fn delete_message(
    State(state): State<Arc<AppState>>,
    Talker(auth): Talker,
    Path((channel, seq)): Path<(String, u64)>,
) -> Result<Response, Problem> {
    post_change(&state, auth, channel, seq, ChangeKind::Delete).await
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReactRequest {
    /// An emoji or short token: 1 to 64 bytes, no spaces.
    pub emoji: String,
    /// `true` withdraws the caller's reaction.
    #[serde(default)]
    pub removed: bool,
}

/// Reacts to a text message (or withdraws a reaction), as a `reaction` message.
#[utoipa::path(post, path = "/v1/channels/{channel}/messages/{seq}/reactions", params(("channel" = String, Path), ("seq" = u64, Path)), request_body = ReactRequest, security(("credential" = []), ("session" = [])), responses((status = 201, description = "The reaction, a message of its own", body = schema::Message)))]
async fn react(
    State(state): State<Arc<AppState>>,
    Talker(auth): Talker,
    Path((channel, seq)): Path<(String, u64)>,
    ApiJson(body): ApiJson<ReactRequest>,
) -> Result<Response, Problem> {
    post_change(&state, auth, channel, seq, ChangeKind::React { emoji: body.emoji, removed: body.removed }).await
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MuteRequest {
    /// A muted channel still delivers, but wakes the member only on a mention.
    pub muted: bool,
}

/// Mutes or unmutes a channel for the caller.
#[utoipa::path(put, path = "/v1/channels/{channel}/mute", params(("channel" = String, Path)), request_body = MuteRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "The membership", body = schema::Membership)))]
async fn set_muted(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(channel): Path<String>,
    ApiJson(body): ApiJson<MuteRequest>,
) -> Result<Response, Problem> {
    let (me, channel) = (auth.member.id, ChannelId(channel));
    let stint = state.plane()?.call(move |store| store.set_muted(&channel, &me, body.muted)).await?;
    Ok(Json(stint).into_response())
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadRequest {
    /// The highest `seq` read; the mark only moves forward.
    pub seq: u64,
}

/// Moves the caller's read mark in a channel forward.
#[utoipa::path(post, path = "/v1/channels/{channel}/read", params(("channel" = String, Path)), request_body = ReadRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "The membership", body = schema::Membership)))]
async fn mark_read(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(channel): Path<String>,
    ApiJson(body): ApiJson<ReadRequest>,
) -> Result<Response, Problem> {
    let (me, channel) = (auth.member.id, ChannelId(channel));
    let stint = state.plane()?.call(move |store| store.mark_read(&me, &channel, body.seq)).await?;
    Ok(Json(stint).into_response())
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PostRequest {
    /// 1 to 4,096 bytes of UTF-8. `@handle` mentions are resolved now.
    /// Empty (or absent) with `sealed`.
    #[serde(default)]
    pub body: String,
    /// The `seq` of the message this one answers, in the same channel.
    pub reply_to: Option<u64>,
    /// In a sealed channel, the sealed body (`docs/sealing.md`).
    #[schema(value_type = Option<Object>)]
    pub sealed: Option<SealedBody>,
    /// The author's Ed25519 signature over the message (`docs/sealing.md`):
    /// required with `sealed`, optional otherwise; checked against the author's `did:key`.
    pub signature: Option<String>,
    /// Handles a sealed body mentions (the registry cannot read it to find them).
    #[serde(default)]
    pub mentions: Vec<String>,
    /// Registry records the message points at (`{"kind": "dispute", "id": "dsp_…"}`;
    /// kinds: order, share, dispute, contract, job, rfq, token, ledger). Each
    /// resolves by its own route, for those that route lets read it.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub refs: Vec<bazaar_conversation::RecordRef>,
}

/// The handles a post mentions and the author's own, looked up before the
/// post so the plane's transaction never waits on the registry's store.
async fn handle_book(state: &AppState, author: &Member, body: &str, listed: &[String]) -> Result<HandleBook, Problem> {
    let mut handles = mentioned_handles(body);
    handles.extend(listed.iter().map(|handle| handle.strip_prefix('@').unwrap_or(handle)));
    if handles.len() > MESSAGE_MENTION_CANDIDATES_MAX {
        let error = ConversationError::TooManyMentions { count: handles.len(), max: MESSAGE_MENTION_CANDIDATES_MAX };
        return Err(crate::plane::problem(error));
    }
    let mut book = HandleBook::default();
    book.insert(author.handle.clone(), author.id.clone());
    for handle in handles {
        if let Some(member) = state.store.member_by_handle(handle).await? {
            book.insert(handle, member.id);
        }
    }
    Ok(book)
}

/// The owner an agent speaks for; none for anyone else.
fn speaks_for(member: &Member) -> Option<bazaar_types::MemberId> {
    match member.kind {
        MemberKind::Agent => member.owner.clone(),
        _ => None,
    }
}

/// The optional `Idempotency-Key` of a post: 1 to `IDEMPOTENCY_KEY_LEN_MAX` visible ASCII characters.
fn idempotency_key(headers: &axum::http::HeaderMap) -> Result<Option<String>, Problem> {
    let Some(value) = headers.get("idempotency-key") else { return Ok(None) };
    let key = value.to_str().ok().filter(|k| !k.is_empty() && k.len() <= IDEMPOTENCY_KEY_LEN_MAX);
    let key = key.ok_or_else(|| {
        Problem::invalid(format!("`Idempotency-Key` is 1 to {IDEMPOTENCY_KEY_LEN_MAX} visible ASCII characters."))
    })?;
    Ok(Some(key.to_string()))
}

/// Posts a message. An agent's message names its owner in `on_behalf_of`
/// (a person's agent and a standalone agent are different authors), without
/// gaining the owner's standing in the channel.
#[utoipa::path(post, path = "/v1/channels/{channel}/messages", params(("channel" = String, Path), ("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key returns the first post")), request_body = PostRequest, security(("credential" = []), ("session" = [])), responses((status = 201, description = "The message, with its `seq` and log `position`", body = schema::Message)))]
async fn post_message(
    State(state): State<Arc<AppState>>,
    Talker(auth): Talker,
    Path(channel): Path<String>,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<PostRequest>,
) -> Result<Response, Problem> {
    let plane = state.plane()?;
    let channel = ChannelId(channel);
    let content = match &body.sealed {
        None => {
            check_body(&body.body).map_err(crate::plane::problem)?;
            Content::Plain(&body.body)
        }
        Some(sealed) => Content::Sealed(sealed),
    };
    check_post_signature(&channel, &auth.member.id, &content, body.signature.as_deref())?;
    let book = handle_book(&state, &auth.member, &body.body, &body.mentions).await?;
    let idem_key = idempotency_key(&headers)?;
    let new = NewMessage {
        channel,
        on_behalf_of: speaks_for(&auth.member),
        authored_by: auth.member.id,
        body: body.body,
        reply_to: body.reply_to,
        idem_key,
        by_agent: auth.member.kind == MemberKind::Agent,
        sealed: body.sealed,
        signature: body.signature,
        mentions: body.mentions,
        refs: body.refs,
    };
    let message = plane.call(move |store| store.post(&book, new)).await?;
    plane.published(&message);
    Ok((StatusCode::CREATED, Json(message)).into_response())
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    /// Messages older than this `seq` (paging back).
    pub before: Option<u64>,
    /// Messages newer than this `seq` (catching up).
    pub after: Option<u64>,
    pub limit: Option<usize>,
    /// An agent of the caller (DID or handle): read the history as that agent.
    #[serde(rename = "as")]
    pub as_agent: Option<String>,
}

/// A page of a channel's history, oldest first: the newest messages, those
/// before a `seq`, or those after one. Members only.
#[utoipa::path(get, path = "/v1/channels/{channel}/messages", operation_id = "channel_messages", params(("channel" = String, Path), ("before" = Option<u64>, Query), ("after" = Option<u64>, Query), ("limit" = Option<usize>, Query), ("as" = Option<String>, Query, description = "An agent of the caller: read as it")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Messages, oldest first", body = [schema::Message])))]
async fn history(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(channel): Path<String>,
    ApiQuery(query): ApiQuery<HistoryQuery>,
) -> Result<Response, Problem> {
    let range = match (query.before, query.after) {
        (None, None) => HistoryRange::Latest,
        (Some(seq), None) => HistoryRange::Before(seq),
        (None, Some(seq)) => HistoryRange::After(seq),
        (Some(_), Some(_)) => return Err(Problem::invalid("Give `before` or `after`, not both.")),
    };
    let limit = query.limit.unwrap_or(PAGE_DEFAULT);
    let me = reader(&state, &auth, query.as_agent.as_deref()).await?;
    let channel = ChannelId(channel);
    let page = state.plane()?.call(move |store| store.history(&channel, &me, range, limit)).await?;
    Ok(Json(page).into_response())
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InboxQuery {
    /// The cursor: the `next_after` of the previous page, or a message's `position`.
    pub after: Option<u64>,
    pub limit: Option<usize>,
}

/// Everything delivered to the caller after a cursor, in log order: the poll
/// transport. Pass `next_after` back as `after`; it may run past the last
/// message returned when the read skipped messages not delivered to the caller.
#[utoipa::path(get, path = "/v1/inbox", params(("after" = Option<u64>, Query), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "A page of the inbox", body = schema::InboxPage)))]
async fn inbox(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<InboxQuery>,
) -> Result<Response, Problem> {
    let (me, after, limit) = (auth.member.id, query.after.unwrap_or(0), query.limit.unwrap_or(PAGE_DEFAULT));
    let plane = state.plane()?;
    let reader = me.clone();
    let page = plane.call(move |store| store.inbox(&reader, after, limit)).await?;
    plane.count(&me, "poll", page.messages.len());
    Ok(Json(serde_json::json!({ "messages": page.messages, "next_after": page.next_after })).into_response())
}

/// What needs the caller's attention: per channel it is in, the unread
/// messages and, of those, the ones that wake it. Derived on each read.
#[utoipa::path(get, path = "/v1/attention", security(("credential" = []), ("session" = [])), responses((status = 200, description = "Channels with unread messages", body = [schema::Attention])))]
async fn attention(State(state): State<Arc<AppState>>, auth: Auth) -> Result<Response, Problem> {
    let me = auth.member.id;
    let found = state.plane()?.call(move |store| store.attention(&me)).await?;
    Ok(Json(found).into_response())
}
