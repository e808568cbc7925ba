//! `bazaar reprice ORDERS.csv`: a month of real orders turned into a per-call
//! price list, a suggested escrow threshold and the margin under the
//! registry's fee (the library's `reprice` does the work; this prints it).

use super::common::print;
use anyhow::{Context, Result};
use bazaar_cli::reprice::{reprice, Repriced};
use clap::Subcommand;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum Command {
    /// Reprice, don't replatform: a month of orders (CSV) as a per-call price list, an escrow threshold and margins.
    Reprice {
        /// The orders: date, customer, items (sku:quantity:unit_minor;…), amount_minor, cost_minor.
        orders: PathBuf,
        /// The registry's protocol fee in basis points (the default registry's).
        #[arg(long, default_value_t = bazaar_types::limits::PROTOCOL_FEE_BPS)]
        fee_bps: u32,
    },
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    let Command::Reprice { orders, fee_bps } = command;
    anyhow::ensure!(fee_bps <= 10_000, "--fee-bps is at most 10000");
    let text = std::fs::read_to_string(&orders).with_context(|| format!("reading {}", orders.display()))?;
    let repriced = reprice(&text, fee_bps).with_context(|| format!("{} was not imported", orders.display()))?;
    print(json_output, &serde_json::to_value(&repriced)?, |_| prose(&repriced));
    Ok(0)
}

fn units(minor: i64) -> String {
    format!("{minor} units")
}

fn prose(r: &Repriced) -> String {
    let mut out = format!("{} orders from {} customers\n\nper-call price list:\n", r.orders, r.customers);
    for line in &r.price_list {
        out.push_str(&format!(
            "  {:<20} {:>10} per call   ({} calls in {} orders; sold at {}–{})\n",
            line.sku,
            units(line.price_minor as i64),
            line.calls,
            line.orders,
            line.min_unit_minor,
            line.max_unit_minor
        ));
    }
    out.push_str(&format!(
        "\nsuggested escrow threshold: {} ({} orders above it would ride escrow)\n",
        units(r.suggested_escrow_threshold_minor as i64),
        r.orders_above_threshold
    ));
    out.push_str(&format!(
        "margin as the file says it was: {} of {} revenue ({:.2} %)\n",
        units(r.margin_before_minor),
        units(r.revenue_minor as i64),
        r.margin_before_bps as f64 / 100.0
    ));
    out.push_str(&format!(
        "under the registry's fee ({} bps, {} in all): {} ({:.2} %)",
        r.fee_bps,
        units(r.fees_minor as i64),
        units(r.margin_after_minor),
        r.margin_after_bps as f64 / 100.0
    ));
    out
}
