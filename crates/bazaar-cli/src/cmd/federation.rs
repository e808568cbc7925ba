//! Between registries: `federation` (operator: recognise a peer, list peers)
//! and `keys` (the signing-key history passports are checked against; rotate).
//! Every answer prints as indented JSON.

use super::common::{print_pretty, Remote};
use anyhow::Result;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum Command {
    /// Operator: peer registries (federation).
    Federation {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        action: FederationCmd,
    },
    /// The registry's signing keys: show the published history, or rotate (operator).
    Keys {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        action: KeysCmd,
    },
}

#[derive(Subcommand)]
pub enum FederationCmd {
    /// Recognise a peer registry: its card at URL must be signed by DID's key history.
    Add {
        /// The peer registry's base URL (http or https); its card is read from /.well-known/bazaar there.
        url: String,
        /// The peer registry's DID; the card must be signed by its key history.
        did: String,
        /// How much its passports count here, in basis points (10000 = like local work).
        #[arg(long, default_value_t = 5_000)]
        weight_bps: u32,
        /// Fee this registry takes on settlements relayed from that registry's buyers.
        #[arg(long, default_value_t = 0)]
        fee_bps: u32,
        /// The largest single token across this corridor, in minor units (default: the escrow threshold).
        #[arg(long, default_value_t = bazaar_types::limits::ESCROW_THRESHOLD_MINOR)]
        per_call_max: u64,
        /// The most this registry may owe that peer (the corridor's balance) after a settlement, in minor units.
        #[arg(long, default_value_t = 10_000_000)]
        outstanding_max: u64,
    },
    /// The peers this registry recognises.
    List,
    /// Relays this registry stopped retrying (no answer from the buyer's registry for 24 h): the recovery records.
    Recovery,
    /// Retry one stuck relay now (by its token id); the sweeper retries it for another 24 h after that.
    Retry {
        /// The stuck relay's token id (`jti`), as `bazaar federation recovery` lists it.
        #[arg(value_name = "TOKEN_ID")]
        jti: String,
    },
    /// Net the corridor with a peer: record a payment made between the registries off the ledger, signed by both.
    Net {
        /// The peer registry's DID.
        peer: String,
        /// Units paid.
        amount: u64,
        /// Who paid: `us` (this registry paid the peer) or `peer`.
        #[arg(long, value_parser = ["us", "peer"])]
        paid_by: String,
        /// The statement id (the wire's reference, say); run the same command again to resend it.
        #[arg(long)]
        id: String,
        /// The operators' reference for the payment, e.g. the wire's (at most 200 characters); none by default.
        #[arg(long, default_value = "")]
        reference: String,
    },
    /// The netting statements this registry holds.
    Netting,
}

#[derive(Subcommand)]
pub enum KeysCmd {
    /// The published key history.
    Show,
    /// Operator: rotate to a fresh key; old passports stay verifiable through the history.
    Rotate,
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    let value = match command {
        Command::Federation { remote, action } => {
            let client = remote.client()?;
            match action {
                FederationCmd::Add { url, did, weight_bps, fee_bps, per_call_max, outstanding_max } => {
                    bazaar_cli::wire_json(
                        &client.add_peer(&url, &did, weight_bps, (fee_bps, per_call_max, outstanding_max)).await?,
                    )
                }
                FederationCmd::List => bazaar_cli::wire_json(&client.peers().await?),
                FederationCmd::Recovery => bazaar_cli::wire_json(&client.relay_recovery().await?),
                FederationCmd::Retry { jti } => bazaar_cli::wire_json(&client.retry_relay(&jti).await?),
                FederationCmd::Net { peer, amount, paid_by, id, reference } => {
                    bazaar_cli::wire_json(&client.net_corridor(&peer, &paid_by, amount, &id, &reference).await?)
                }
                FederationCmd::Netting => bazaar_cli::wire_json(&client.netting().await?),
            }
        }
        Command::Keys { remote, action } => {
            let client = remote.client()?;
            match action {
                KeysCmd::Show => bazaar_cli::wire_json(&client.key_history().await?),
                KeysCmd::Rotate => bazaar_cli::wire_json(&client.rotate_key().await?),
            }
        }
    };
    print_pretty(json_output, &value);
    Ok(0)
}
