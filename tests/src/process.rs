//! The processes the tests and the bench start: a helper script (Python, mostly) run for the JSON
//! it prints, and a function binary run as Lambda runs it.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;
use tokio::process::{Child, Command};

/// Runs `command` to its end and answers what it printed, as JSON. Fails, naming `what` (and, when
/// it ran and failed, with its stderr), when it cannot start, exits unsuccessfully, or prints
/// anything but JSON.
pub async fn json_output(command: &mut Command, what: &str) -> Value {
    let out = command
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what} prints JSON: {e}"))
}

/// Binary `name` as the workspace builds it in `profile` (`debug`, `release`), in
/// `CARGO_TARGET_DIR` (scripts/test.sh's) or the workspace's own `target/`.
pub fn built_bin(profile: &str, name: &str) -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../target").to_owned());
    PathBuf::from(target).join(profile).join(name)
}

/// Function binary `bin`, started as Lambda starts one: with `env` alone (the Lambda environment,
/// [`function_env`](crate::runtime_api::function_env), and what the caller adds over it), its
/// standard output to `stdout` and its errors dropped, and killed when the answer is dropped.
/// Fails naming `bin` and, in `built_by`, what builds it.
pub fn start_function(
    bin: &Path,
    env: impl IntoIterator<Item = (String, String)>,
    stdout: Stdio,
    built_by: &str,
) -> Child {
    Command::new(bin)
        .env_clear()
        .envs(env)
        .stdout(stdout)
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e} ({built_by})", bin.display()))
}
