//! A function binary refuses to start inside AWS Lambda when the local-only unsigned-JWT mode is on,
//! and names the missing configuration when it is incomplete.

use std::process::Command;

fn start(env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_create-session"));
    cmd.env_clear()
        .env("AWS_REGION", "us-east-1")
        .env("TABLE_NAME", "t")
        .env("TENANT_ROLE_ARN", "arn:aws:iam::123456789012:role/r");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn dev_auth_inside_aws_lambda_refuses_to_start() {
    // Each variable the Lambda service sets is enough: provided.al2023 sets no AWS_EXECUTION_ENV.
    for signal in [
        ("LAMBDA_TASK_ROOT", "/var/task"),
        ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand"),
        ("AWS_EXECUTION_ENV", "AWS_Lambda_java21"),
    ] {
        let (ok, stderr) = start(&[("POOLTABLE_DEV_UNSIGNED_JWT", "1"), signal]);
        assert!(!ok, "{signal:?}");
        assert!(
            stderr.contains("never accepted in AWS"),
            "{signal:?}: {stderr}"
        );
    }
}

#[test]
fn dev_auth_under_sam_local_is_accepted() {
    // GIVEN the variables SAM CLI's emulator sets: the Lambda ones plus AWS_SAM_LOCAL=true
    let (ok, stderr) = start(&[
        ("POOLTABLE_DEV_UNSIGNED_JWT", "1"),
        ("LAMBDA_TASK_ROOT", "/var/task"),
        ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand"),
        ("AWS_SAM_LOCAL", "true"),
        ("CURSOR_SIGNING_KEY", "0123456789abcdef0123456789abcdef"),
    ]);
    // THEN the configuration is accepted; it stops later only because no Runtime API is running here
    assert!(!stderr.contains("never accepted in AWS"), "{stderr}");
    assert!(!ok);
    assert!(stderr.contains("Missing AWS_LAMBDA_"), "{stderr}");
}

#[test]
fn missing_configuration_is_named() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_create-session"));
    let out = cmd
        .env_clear()
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("TABLE_NAME"));
}

#[test]
fn a_missing_or_short_cursor_signing_key_is_named() {
    let (ok, stderr) = start(&[]);
    assert!(!ok);
    assert!(stderr.contains("CURSOR_SIGNING_KEY"), "{stderr}");
    let (ok, stderr) = start(&[("CURSOR_SIGNING_KEY", "too-short")]);
    assert!(!ok);
    assert!(stderr.contains("at least 32 bytes"), "{stderr}");
}

#[test]
fn a_fan_out_budget_outside_1_to_64_is_named() {
    for bad in ["0", "65", "many"] {
        let (ok, stderr) = start(&[
            ("CURSOR_SIGNING_KEY", "0123456789abcdef0123456789abcdef"),
            ("DYNAMODB_MAX_IN_FLIGHT", bad),
        ]);
        assert!(!ok, "{bad}");
        assert!(stderr.contains("DYNAMODB_MAX_IN_FLIGHT"), "{bad}: {stderr}");
    }
}
