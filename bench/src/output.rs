//! What a run leaves behind: `target/bench/results.json` (every figure) and
//! `target/bench/latency.svg` (a chart of the latency figures).

use std::path::Path;

use crate::report::{Report, Stat};

pub(crate) fn write_outputs(report: &Report) {
    let out_dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/bench"));
    std::fs::create_dir_all(out_dir).unwrap();
    std::fs::write(
        out_dir.join("results.json"),
        serde_json::to_string_pretty(&report.json).unwrap(),
    )
    .unwrap();
    std::fs::write(out_dir.join("latency.svg"), svg(&report.rows)).unwrap();
    println!("\nwrote target/bench/results.json and target/bench/latency.svg");
}

/// A horizontal bar chart of every latency figure: p50 bar, p99 tick.
fn svg(rows: &[(String, Stat, String)]) -> String {
    let max = rows.iter().map(|r| r.1.p99).fold(1.0, f64::max);
    let (w, row_h, left) = (900.0, 22.0, 430.0);
    let mut out = format!(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{}' font-family='sans-serif' font-size='11'>\n<text x='4' y='14' font-weight='bold'>pooltable benchmark: p50 (bar) and p99 (tick), ms</text>\n",
        rows.len() as f64 * row_h + 30.0
    );
    for (i, (name, s, _)) in rows.iter().enumerate() {
        let y = 24.0 + i as f64 * row_h;
        let scale = (w - left - 60.0) / max;
        out += &format!(
            "<text x='4' y='{:.1}'>{}</text><rect x='{left}' y='{:.1}' width='{:.1}' height='14' fill='#4a78c2'/><line x1='{:.1}' x2='{:.1}' y1='{:.1}' y2='{:.1}' stroke='#c24a4a' stroke-width='2'/><text x='{:.1}' y='{:.1}'>{:.2}</text>\n",
            y + 11.0,
            name.replace('&', "&amp;").replace('<', "&lt;"),
            y,
            s.median * scale,
            left + s.p99 * scale,
            left + s.p99 * scale,
            y,
            y + 14.0,
            left + s.p99 * scale + 4.0,
            y + 11.0,
            s.median
        );
    }
    out + "</svg>\n"
}
