//! What every figure reports through: its samples' statistics, the table printed as the run goes,
//! and the JSON the run writes at its end.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{json, Value};

#[derive(Debug, Clone)]
pub(crate) struct Stat {
    pub(crate) median: f64,
    pub(crate) p99: f64,
    pub(crate) count: usize,
}

pub(crate) fn stat(mut ms: Vec<f64>) -> Stat {
    if ms.is_empty() {
        // Nothing answered (a figure reports its failures beside it).
        return Stat {
            median: f64::NAN,
            p99: f64::NAN,
            count: 0,
        };
    }
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() as f64 - 1.0) * q).round() as usize];
    Stat {
        median: at(0.5),
        p99: at(0.99),
        count: ms.len(),
    }
}

pub(crate) struct Report {
    pub(crate) rows: Vec<(String, Stat, String)>,
    pub(crate) json: BTreeMap<String, Value>,
}

impl Report {
    /// An empty report, its table's header printed.
    pub(crate) fn start() -> Self {
        let report = Report {
            rows: Vec::new(),
            json: BTreeMap::new(),
        };
        println!(
            "{:<58} {:>9} {:>9} {:>6}  note",
            "figure (ms)", "p50", "p99", "n"
        );
        report
    }
    pub(crate) fn add(&mut self, name: &str, s: &Stat, note: String) {
        println!(
            "{:<58} {:>9.3} {:>9.3} {:>6}  {}",
            name, s.median, s.p99, s.count, note
        );
        self.json.insert(
            name.to_owned(),
            json!({"median_ms": s.median, "p99_ms": s.p99, "count": s.count, "note": note}),
        );
        self.rows.push((name.to_owned(), s.clone(), note));
    }
    pub(crate) fn fact(&mut self, name: &str, value: Value, note: &str) {
        println!("{:<58} {:>26}  {}", name, value.to_string(), note);
        self.json
            .insert(name.to_owned(), json!({"value": value, "note": note}));
    }
    /// The p50 of figure `name`, added earlier in this run.
    pub(crate) fn median(&self, name: &str) -> f64 {
        self.rows
            .iter()
            .find(|(n, _, _)| n == name)
            .map_or(f64::NAN, |(_, s, _)| s.median)
    }
}

pub(crate) async fn time_ms<F: std::future::Future>(f: F) -> (f64, F::Output) {
    let t = Instant::now();
    let out = f.await;
    (t.elapsed().as_secs_f64() * 1000.0, out)
}
