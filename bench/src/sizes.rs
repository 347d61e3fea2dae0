//! Figure 7's sizes: the functions' bootstrap binaries as Lambda would be given them.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use crate::report::Report;

/// 7. Bootstrap sizes, from `cargo lambda build --release --arm64` (scripts/package.sh).
pub(crate) fn bootstrap_sizes(report: &mut Report) {
    let lambda_dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/lambda"));
    let mut sizes = BTreeMap::new();
    if let Ok(dirs) = std::fs::read_dir(lambda_dir) {
        for d in dirs.flatten() {
            if let Ok(m) = std::fs::metadata(d.path().join("bootstrap")) {
                sizes.insert(d.file_name().to_string_lossy().into_owned(), m.len());
            }
        }
    }
    if sizes.is_empty() {
        report.fact(
            "7. bootstrap size (arm64, stripped)",
            json!(null),
            "no target/lambda/*/bootstrap: scripts/bench.sh builds them first",
        );
        return;
    }
    for (function, bytes) in &sizes {
        report.fact(
            &format!("7. bootstrap: {function}"),
            json!(format!("{:.2} MB", *bytes as f64 / 1_048_576.0)),
            "",
        );
    }
    let max = sizes.values().copied().max().unwrap_or(0);
    let over = sizes.values().filter(|b| **b > 4 * 1_048_576).count();
    report.fact(
        "7. bootstrap size (arm64, stripped), largest",
        json!(format!("{:.2} MB", max as f64 / 1_048_576.0)),
        &format!(
            "{} functions measured, {over} over the target of 4 MB",
            sizes.len()
        ),
    );
    report
        .json
        .insert("7. bootstrap sizes".into(), json!(sizes));
}
