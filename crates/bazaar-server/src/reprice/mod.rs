//! "Reprice, don't replatform": a month of a merchant's real orders (CSV)
//! turned into a per-call price list, a suggested escrow threshold, and where
//! the margin lands once the registry's protocol fee is taken — against what
//! the file says it was. All or nothing: the first malformed row is reported
//! with its line number and nothing is produced.
//!
//! The file has a header row and these columns, in any order (others are ignored):
//! `date` (YYYY-MM-DD), `customer`, `items` (`sku:quantity:unit_minor`
//! separated by `;`), `amount_minor` (what the customer paid for the order)
//! and `cost_minor` (what fulfilling it cost).

pub mod route;

use bazaar_types::limits::{AMOUNT_MINOR_MAX, ESCROW_THRESHOLD_MINOR};
use std::collections::{BTreeMap, BTreeSet};

/// Orders one file may hold.
pub const REPRICE_ROWS_MAX: usize = 100_000;
/// Line items in one order.
pub const REPRICE_ITEMS_MAX: usize = 64;
/// The file's size.
pub const REPRICE_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Orders above this share of the month go to escrow under the suggested threshold (95th percentile).
pub const THRESHOLD_PERCENTILE: f64 = 95.0;

const COLUMNS: [&str; 5] = ["date", "customer", "items", "amount_minor", "cost_minor"];

/// Why the file was refused: the line (1 is the header) and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct RowError {
    pub line: usize,
    pub problem: String,
}

fn at(line: usize, problem: impl Into<String>) -> RowError {
    RowError { line, problem: problem.into() }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Item {
    sku: String,
    quantity: u64,
    unit_minor: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Order {
    customer: String,
    items: Vec<Item>,
    amount_minor: u64,
    cost_minor: u64,
}

pub use bazaar_wire::reprice::{PriceLine, Repriced};

fn number(line: usize, field: &str, text: &str) -> Result<u64, RowError> {
    let value: u64 =
        text.trim().parse().map_err(|_| at(line, format!("{field} {text:?} is not a whole number of minor units")))?;
    if value > AMOUNT_MINOR_MAX {
        return Err(at(line, format!("{field} {value} is above the largest amount ({AMOUNT_MINOR_MAX})")));
    }
    Ok(value)
}

fn is_date(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    matches!(parts.as_slice(), [y, m, d] if y.len() == 4 && m.len() == 2 && d.len() == 2
        && [y, m, d].iter().all(|p| p.bytes().all(|b| b.is_ascii_digit()))
        && (1..=12).contains(&m.parse::<u32>().unwrap_or(0)) && (1..=31).contains(&d.parse::<u32>().unwrap_or(0)))
}

fn items(line: usize, text: &str) -> Result<Vec<Item>, RowError> {
    let mut found = Vec::new();
    for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let fields: Vec<&str> = part.split(':').collect();
        let [sku, quantity, unit] = fields.as_slice() else {
            return Err(at(line, format!("item {part:?} is not sku:quantity:unit_minor")));
        };
        if sku.trim().is_empty() {
            return Err(at(line, format!("item {part:?} has no sku")));
        }
        let quantity = number(line, "quantity", quantity)?;
        if quantity == 0 {
            return Err(at(line, format!("item {part:?} has a quantity of 0")));
        }
        found.push(Item { sku: sku.trim().to_string(), quantity, unit_minor: number(line, "unit price", unit)? });
    }
    if found.is_empty() {
        return Err(at(line, "the order has no items"));
    }
    if found.len() > REPRICE_ITEMS_MAX {
        return Err(at(line, format!("the order has {} items; at most {REPRICE_ITEMS_MAX}", found.len())));
    }
    Ok(found)
}

/// Reads every order, or the first malformed row.
fn orders(text: &str) -> Result<Vec<Order>, RowError> {
    if text.len() > REPRICE_BYTES_MAX {
        return Err(at(0, format!("the file is larger than {REPRICE_BYTES_MAX} bytes")));
    }
    let mut reader = csv::ReaderBuilder::new().flexible(false).trim(csv::Trim::All).from_reader(text.as_bytes());
    let header = reader.headers().map_err(|e| at(1, format!("the header row does not read: {e}")))?.clone();
    let column = |name: &str| header.iter().position(|h| h == name);
    let mut index = BTreeMap::new();
    for name in COLUMNS {
        let position = column(name)
            .ok_or_else(|| at(1, format!("the header has no `{name}` column (needs {})", COLUMNS.join(", "))))?;
        index.insert(name, position);
    }
    let mut found = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| at(e.position().map_or(0, |p| p.line() as usize), format!("{e}")))?;
        let line = record.position().map_or(0, |p| p.line() as usize);
        let field = |name: &str| record.get(index[name]).unwrap_or_default();
        if !is_date(field("date")) {
            return Err(at(line, format!("date {:?} is not YYYY-MM-DD", field("date"))));
        }
        if field("customer").is_empty() {
            return Err(at(line, "the customer is empty"));
        }
        found.push(Order {
            customer: field("customer").to_string(),
            items: items(line, field("items"))?,
            amount_minor: number(line, "amount_minor", field("amount_minor"))?,
            cost_minor: number(line, "cost_minor", field("cost_minor"))?,
        });
        if found.len() > REPRICE_ROWS_MAX {
            return Err(at(line, format!("more than {REPRICE_ROWS_MAX} orders in one file")));
        }
    }
    if found.is_empty() {
        return Err(at(2, "the file has no orders"));
    }
    Ok(found)
}

/// The nearest-rank percentile of `values` (sorted here).
fn percentile(values: &mut [u64], p: f64) -> u64 {
    values.sort_unstable();
    let rank = ((p / 100.0) * values.len() as f64).ceil().max(1.0) as usize;
    values[rank.min(values.len()) - 1]
}

/// The file's orders, repriced under a protocol fee of `fee_bps`.
pub fn reprice(text: &str, fee_bps: u32) -> Result<Repriced, RowError> {
    let orders = orders(text)?;
    let mut skus: BTreeMap<String, (Vec<u64>, u64, BTreeSet<usize>)> = BTreeMap::new();
    for (n, order) in orders.iter().enumerate() {
        for item in &order.items {
            let entry = skus.entry(item.sku.clone()).or_default();
            entry.0.push(item.unit_minor);
            entry.1 += item.quantity;
            entry.2.insert(n);
        }
    }
    let price_list = skus
        .into_iter()
        .map(|(sku, (mut units, calls, in_orders))| {
            let (min, max) = (*units.iter().min().unwrap_or(&0), *units.iter().max().unwrap_or(&0));
            PriceLine {
                sku,
                calls,
                orders: in_orders.len() as u64,
                min_unit_minor: min,
                max_unit_minor: max,
                price_minor: percentile(&mut units, 50.0),
            }
        })
        .collect();
    let mut amounts: Vec<u64> = orders.iter().map(|o| o.amount_minor).collect();
    let threshold = percentile(&mut amounts, THRESHOLD_PERCENTILE).min(ESCROW_THRESHOLD_MINOR);
    let revenue: u64 = orders.iter().map(|o| o.amount_minor).sum();
    let cost: u64 = orders.iter().map(|o| o.cost_minor).sum();
    let fees: u64 = orders.iter().map(|o| bazaar_types::Amount(o.amount_minor).fee_bps(fee_bps).0).sum();
    let before = revenue as i64 - cost as i64;
    let after = before - fees as i64;
    let share = |margin: i64| if revenue == 0 { 0 } else { margin * 10_000 / revenue as i64 };
    Ok(Repriced {
        orders: orders.len(),
        customers: orders.iter().map(|o| o.customer.as_str()).collect::<BTreeSet<_>>().len(),
        price_list,
        suggested_escrow_threshold_minor: threshold,
        orders_above_threshold: orders.iter().filter(|o| o.amount_minor > threshold).count(),
        revenue_minor: revenue,
        cost_minor: cost,
        margin_before_minor: before,
        fee_bps,
        fees_minor: fees,
        margin_after_minor: after,
        margin_before_bps: share(before),
        margin_after_bps: share(after),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MONTH: &str = "date,customer,items,amount_minor,cost_minor\n\
        2026-11-02,Hotel Lindqvist,napkin:10:150;towel:2:900,3300,2100\n\
        2026-11-09,Cafe Nord,napkin:20:140,2800,1900\n\
        2026-11-17,Hotel Lindqvist,\"towel:4:950\",3800,2500\n\
        2026-11-28,Spa Sol,napkin:5:160;towel:1:900,1700,1100\n";

    #[test]
    fn a_month_becomes_a_price_list_a_threshold_and_margins() {
        let out = reprice(MONTH, 100).unwrap();
        assert_eq!((out.orders, out.customers), (4, 3));
        let napkin = &out.price_list[0];
        assert_eq!((napkin.sku.as_str(), napkin.calls, napkin.orders, napkin.price_minor), ("napkin", 35, 3, 150));
        assert_eq!((napkin.min_unit_minor, napkin.max_unit_minor), (140, 160));
        let towel = &out.price_list[1];
        assert_eq!((towel.calls, towel.price_minor), (7, 900));
        assert_eq!(out.suggested_escrow_threshold_minor, 3800, "the 95th percentile of four orders is the largest");
        assert_eq!(out.orders_above_threshold, 0);
        assert_eq!((out.revenue_minor, out.cost_minor, out.margin_before_minor), (11_600, 7_600, 4_000));
        assert_eq!(out.fees_minor, 33 + 28 + 38 + 17, "1 % of each order, floored");
        assert_eq!(out.margin_after_minor, 4_000 - 116);
        assert_eq!((out.margin_before_bps, out.margin_after_bps), (3448, 3348));
    }

    #[test]
    fn the_first_malformed_row_is_named_and_nothing_is_produced() {
        let cases = [
            ("date,customer,items,amount_minor\n2026-11-02,a,x:1:1,1\n", 1, "no `cost_minor` column"),
            (
                "date,customer,items,amount_minor,cost_minor\n2026-11-02,a,x:1:1,1,1\n2026-13-02,b,x:1:1,1,1\n",
                3,
                "not YYYY-MM-DD",
            ),
            ("date,customer,items,amount_minor,cost_minor\n2026-11-02,a,x:1,1,1\n", 2, "not sku:quantity:unit_minor"),
            ("date,customer,items,amount_minor,cost_minor\n2026-11-02,a,x:0:5,1,1\n", 2, "quantity of 0"),
            ("date,customer,items,amount_minor,cost_minor\n2026-11-02,a,x:1:5,-3,1\n", 2, "not a whole number"),
            ("date,customer,items,amount_minor,cost_minor\n2026-11-02,,x:1:5,3,1\n", 2, "customer is empty"),
            ("date,customer,items,amount_minor,cost_minor\n2026-11-02,a,x:1:5,3\n", 2, "found record with 4 fields"),
            ("date,customer,items,amount_minor,cost_minor\n", 2, "no orders"),
        ];
        for (text, line, says) in cases {
            let refused = reprice(text, 100).unwrap_err();
            assert_eq!(refused.line, line, "{text:?}: {refused}");
            assert!(refused.problem.contains(says), "{text:?}: {refused}");
        }
    }
}
