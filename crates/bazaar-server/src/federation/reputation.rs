//! Reputation reads and trust passports: the reputation fold caught up from the
//! event ledger, issuing and verifying passports (this registry's and its
//! peers'), and importing a peer's passport presented by its subject.

use super::peer_client::refresh_peer;
use super::peers::{peer_of, peers};
use crate::auth::{ApiJson, Auth};
use crate::exec::{self, execute, resolve};
use crate::problem::Problem;
use crate::state::AppState;
use crate::NETWORK_UNIT;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_core::command::Op;
use bazaar_core::crypto::{public_key_from_did, verify};
use bazaar_core::federation;
use bazaar_core::federation::{
    presentation_message, verify_passport, ImportRecord, KeyEntry, BAZAAR_CONTEXT, PASSPORT_TYPE, VC_CONTEXT,
};
use bazaar_core::model::{DocKind, MemberKind};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_core::reputation::{combine, Imported, IssuedFigures, Ledger};
use bazaar_core::vc;
use bazaar_types::limits::*;
use bazaar_types::{MemberId, Timestamp};
use bazaar_wire::federation as schema;
use bazaar_wire::reputation::{LedgerPosition, Reputation};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Reputation's and passports' routes, each with its OpenAPI entry.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(get_reputation))
        .routes(routes!(import_passport))
        .routes(routes!(post_passport))
        .routes(routes!(verify_passport_route))
}

/// The reputation fold, caught up to the ledger's head (see `reputation_fold`).
pub async fn caught_up(state: &AppState) -> Result<tokio::sync::MappedMutexGuard<'_, Ledger>, Problem> {
    Ok(state.reputation.caught_up(&state.store, &state.metrics).await?)
}

async fn imports_of(state: &AppState, subject: &MemberId) -> Result<Vec<Imported>, Problem> {
    let rows = state.store.docs_by_party(DocKind::Import, subject, "", IMPORTED_PASSPORTS_MAX).await?;
    let now = state.now().ms();
    Ok(rows
        .iter()
        .filter_map(|row| serde_json::from_value::<ImportRecord>(row.body.clone()).ok())
        .map(|record| record.imported)
        .filter(|imported| imported.valid_until_ms > now)
        .collect())
}

/// Everything published about one DID: local figures, stake, imports, combined.
pub async fn reputation_of(state: &AppState, subject: &MemberId) -> Result<Reputation, Problem> {
    let imported = imports_of(state, subject).await?;
    let ledger = caught_up(state).await?;
    let local = ledger.figures(subject, state.now());
    let combined = combine(&local, &imported);
    Ok(Reputation {
        subject: subject.to_string(),
        local,
        stake: ledger.stake(subject),
        imported,
        combined,
        as_of: LedgerPosition { ledger_seq: ledger.seq, ledger_head: ledger.head.clone() },
    })
}

/// Public: the reputation of a DID or handle, computed from the ledger now.
#[utoipa::path(get, path = "/v1/reputation/{member}", responses((status = 200, description = "Figures, stake, imports", body = schema::Reputation)))]
pub async fn get_reputation(
    State(state): State<Arc<AppState>>,
    Path(member): Path<String>,
) -> Result<Json<Reputation>, Problem> {
    let subject = if member.starts_with("did:") { MemberId(member) } else { resolve(&state, &member).await?.id };
    Ok(Json(reputation_of(&state, &subject).await?))
}

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PassportRequest {
    /// DID or handle; defaults to the caller.
    #[serde(default)]
    pub subject: Option<String>,
}

/// A fresh passport for `subject`, signed with the current key and recorded on the ledger.
pub async fn issue_passport(state: &Arc<AppState>, subject: &MemberId) -> Result<Value, Problem> {
    let now = state.now();
    let (figures, stake, seq, head) = {
        let ledger = caught_up(state).await?;
        let issued = ledger.passports_on(subject, now);
        if issued >= PASSPORTS_PER_SUBJECT_DAY_MAX {
            return Err(Refusal::new(
                Code::PassportLimit,
                format!("At most {PASSPORTS_PER_SUBJECT_DAY_MAX} passports per subject per UTC day; a passport stays valid for 24 h."),
            )
            .with(json!({"issued_today": issued}))
            .into());
        }
        (ledger.figures(subject, now), ledger.stake(subject), ledger.seq, ledger.head.clone())
    };
    let until = now.plus_s(PASSPORT_VALIDITY_S);
    let id = format!("urn:bazaar:passport:{}", state.random_b64(16));
    let key = state.signing_key();
    let key_did = bazaar_core::crypto::did_key(&key.verifying_key());
    let mut credential_subject = serde_json::to_value(&figures).expect("figures serialize");
    credential_subject["id"] = json!(subject);
    credential_subject["registry"] = json!(state.registry);
    credential_subject["window"] = json!(format!("P{REPUTATION_WINDOW_DAYS}D"));
    credential_subject["asOf"] = json!({"ledgerSeq": seq, "ledgerHead": format!("sha256:{head}")});
    credential_subject["stake"] = serde_json::to_value(&stake).expect("stake serializes");
    credential_subject["networkUnit"] = json!(NETWORK_UNIT);
    let unsigned = json!({
        "@context": [VC_CONTEXT, BAZAAR_CONTEXT],
        "id": id,
        "type": ["VerifiableCredential", PASSPORT_TYPE],
        "issuer": key_did,
        "validFrom": vc::rfc3339_from_ms(now.ms()),
        "validUntil": vc::rfc3339_from_ms(until.ms()),
        "credentialSubject": credential_subject,
    });
    let method = vc::did_key_verification_method(&key.verifying_key());
    let passport = vc::sign_eddsa_jcs_2022(&unsigned, &key, &method, &vc::rfc3339_from_ms(now.ms()))
        .map_err(|e| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    let issued = IssuedFigures { subject: subject.clone(), as_of_seq: seq, figures };
    let op = Op::Federation(federation::Op::RecordPassport { issued, credential_id: id, valid_until_ms: until.ms() });
    exec::receipt(state, state.registry_actor(), op).await?;
    Ok(passport)
}

/// A passport for the caller, an agent the caller owns, or (for the operator) anyone.
#[utoipa::path(post, path = "/v1/passports", request_body = PassportRequest, security(("credential" = []), ("session" = [])), responses((status = 201, description = "A signed TrustPassport (VC 2.0, eddsa-jcs-2022)", body = bazaar_wire::federation::Passport)))]
pub async fn post_passport(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiJson(body): ApiJson<PassportRequest>,
) -> Result<Response, Problem> {
    let subject = match &body.subject {
        None => auth.member.clone(),
        Some(who) => resolve(&state, who).await?,
    };
    let allowed = subject.id == auth.member.id
        || subject.owner.as_ref() == Some(&auth.member.id)
        || auth.member.kind == MemberKind::Operator;
    if !allowed {
        return Err(Refusal::new(Code::NotPermitted, "Ask for your own passport, or one for an agent you own.").into());
    }
    let passport = issue_passport(&state, &subject.id).await?;
    Ok((StatusCode::CREATED, Json(passport)).into_response())
}

/// [`verify_passport`] against this registry and its peers. A passport signed
/// by a key a peer rotated to after this registry last read its card names its
/// registry in `credentialSubject.registry`; that one peer (if recognised) is
/// refreshed once and the passport checked again.
async fn verify_known(state: &AppState, passport: &Value) -> Result<bazaar_core::federation::PassportInfo, Problem> {
    let now = state.now().ms();
    match verify_passport(passport, now, &known_registries(state).await?) {
        Err(refusal) if refusal.code == Code::PassportIssuerUnknown => {
            let named = passport["credentialSubject"]["registry"].as_str().unwrap_or_default();
            let Some(peer) = peer_of(state, named).await? else { return Err(refusal.into()) };
            if refresh_peer(state, &peer).await.is_none() {
                return Err(refusal.into());
            }
            Ok(verify_passport(passport, now, &known_registries(state).await?)?)
        }
        other => Ok(other?),
    }
}

/// The registries whose passports this one accepts: itself and every peer.
async fn known_registries(state: &AppState) -> Result<Vec<(String, Vec<KeyEntry>)>, Problem> {
    let mut registries = vec![(state.registry.to_string(), state.key_history())];
    for peer in peers(state).await? {
        registries.push((peer.did.to_string(), peer.keys));
    }
    Ok(registries)
}

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyPassportRequest {
    #[schema(value_type = bazaar_wire::federation::PassportShape, required = true)]
    pub passport: Value,
}

fn passport_size(passport: &Value) -> Result<(), Problem> {
    if serde_json::to_vec(passport).map(|b| b.len()).unwrap_or(usize::MAX) > PASSPORT_BYTES_MAX {
        return Err(Refusal::new(
            Code::PassportMalformed,
            format!("A passport is at most {PASSPORT_BYTES_MAX} bytes."),
        )
        .into());
    }
    Ok(())
}

/// Public: checks a passport issued by this registry (any key in its history) or a recognised peer.
#[utoipa::path(post, path = "/v1/passports/verify", request_body = VerifyPassportRequest, responses((status = 200, description = "Valid: issuer, subject and figures", body = schema::PassportValid)))]
pub async fn verify_passport_route(
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<VerifyPassportRequest>,
) -> Result<Json<Value>, Problem> {
    passport_size(&body.passport)?;
    let info = verify_known(&state, &body.passport).await?;
    Ok(Json(json!({"valid": true, "registry": info.registry, "key": info.key, "subject": info.subject,
        "credential_id": info.id, "valid_until_ms": info.valid_until_ms, "as_of_seq": info.as_of_seq,
        "figures": info.figures, "local": info.registry == state.registry.as_str()})))
}

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportRequest {
    #[schema(value_type = bazaar_wire::federation::PassportShape, required = true)]
    pub passport: Value,
    /// Milliseconds; within `FEDERATION_SKEW_S_MAX` of this registry's clock.
    pub presented_at_ms: i64,
    /// base64url Ed25519 signature by the passport subject's did:key over
    /// `bazaar-passport-presentation-v1\n<this registry's DID>\n<credential id>\n<presented_at_ms>`.
    pub signature: String,
}

/// Public (the subject's signature is the authentication): imports a peer's
/// passport so its figures count here at the peer's weight.
#[utoipa::path(post, path = "/v1/reputation/import", request_body = ImportRequest, responses((status = 201, description = "Imported", body = schema::PassportImported)))]
pub async fn import_passport(
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<ImportRequest>,
) -> Result<Response, Problem> {
    passport_size(&body.passport)?;
    let now = state.now().ms();
    // Checked in this order: the proof and window, then that the subject itself
    // presents it, then that its issuer is a recognised peer.
    let info = verify_known(&state, &body.passport).await?;
    let subject_key = public_key_from_did(info.subject.as_str()).map_err(|_| {
        Refusal::new(Code::PassportSubjectMismatch, "The passport's subject is not a did:key that can sign.")
    })?;
    super::check_presented_at(now, body.presented_at_ms)?;
    let message = presentation_message(state.registry.as_str(), &info.id, body.presented_at_ms);
    if verify(&subject_key, &message, &body.signature).is_err() {
        return Err(Refusal::new(
            Code::PassportSubjectMismatch,
            "The presentation is not signed by the passport's subject: only the agent the passport names may present it.",
        )
        .with(json!({"subject": info.subject}))
        .into());
    }
    if info.registry == state.registry.as_str() {
        return Err(Refusal::new(
            Code::InvalidRequest,
            "This registry's own passports need no import: their figures are already local.",
        )
        .into());
    }
    let imported = Imported {
        registry: info.registry.clone(),
        weight_bps: 0,
        weighted_success_ppm: info.figures.weighted_success_ppm,
        weighted_failure_ppm: info.figures.weighted_failure_ppm,
        score_bps: info.figures.score_bps,
        valid_until_ms: info.valid_until_ms,
    };
    let record =
        ImportRecord { subject: info.subject.clone(), imported, credential_id: info.id, imported_at: Timestamp(now) };
    Ok(execute(
        &state,
        state.registry_actor(),
        None,
        Op::Federation(federation::Op::ImportPassport { record }),
        StatusCode::CREATED,
    )
    .await)
}
