//! `bazaar reprice`: a month of real orders (with a quoted comma in a
//! customer's name and a column it does not need) becomes a price list, an
//! escrow threshold and margins; a malformed file is refused by line number
//! and nothing is printed as if imported.

use std::process::Command;

fn reprice(path: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bazaar")).args(["--json", "reprice"]).arg(path).output().unwrap()
}

#[test]
fn a_month_of_orders_is_repriced_and_a_malformed_one_is_refused_by_line() {
    let month = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/orders-november.csv");
    let out = reprice(&month);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((r["orders"].as_u64(), r["customers"].as_u64()), (Some(4), Some(3)));
    assert_eq!(r["price_list"][0]["sku"], "napkin");
    assert_eq!(r["price_list"][0]["price_minor"], 150);
    assert_eq!(r["suggested_escrow_threshold_minor"], 3800);
    assert_eq!((r["margin_before_minor"].as_i64(), r["margin_after_minor"].as_i64()), (Some(4000), Some(3884)));

    let dir = std::env::temp_dir().join(format!("bazaar-reprice-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let broken = dir.join("broken.csv");
    let text = std::fs::read_to_string(&month).unwrap().replace("towel:4:950", "towel:four:950");
    std::fs::write(&broken, text).unwrap();
    let out = reprice(&broken);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("line 4") && said.contains("quantity") && said.contains("was not imported"), "{said}");
    assert!(!said.contains("price_list"), "nothing half-imported: {said}");
    std::fs::remove_dir_all(&dir).ok();
}
