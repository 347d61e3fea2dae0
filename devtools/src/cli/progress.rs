//! Progress on stderr: a bar (indicatif) when stderr is a terminal, plain lines when it is not (a
//! log, a CI job, a pipe), so that a script reads the same lines every time.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// One command's progress.
pub struct Progress {
    what: String,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// Progress of `what` (`move acme`, `export acme`), drawn on stderr.
    pub fn new(what: impl Into<String>) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Self {
            what: what.into(),
            bar,
        }
    }

    /// Says where the command stands: `done` of `total` when there is a total, and a line.
    pub fn say(&self, counts: Option<(u64, u64)>, line: &str) {
        let Some(bar) = &self.bar else {
            eprintln!("{}: {line}", self.what);
            return;
        };
        match counts {
            Some((done, total)) => {
                if bar.length() != Some(total) {
                    bar.set_length(total);
                    bar.set_style(
                        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_bar()),
                    );
                }
                bar.set_position(done);
            }
            None => bar.set_style(
                ProgressStyle::with_template("{spinner} {prefix} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            ),
        }
        bar.set_prefix(self.what.clone());
        bar.set_message(line.to_owned());
    }

    /// The command has ended: the bar, if any, stays as it last was.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.abandon();
        }
    }
}
