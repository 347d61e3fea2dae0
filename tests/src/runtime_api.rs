//! A minimal Lambda Runtime API on loopback, enough to serve a function binary invocations the way
//! the Lambda service does: `GET /runtime/invocation/next` (held until an event is queued) and
//! `POST /runtime/invocation/{id}/response` (or `/error`), and the Invoke API that callers use
//! (`POST /2015-03-31/functions/{name}/invocations`). HTTP/1.1 with keep-alive, parsed by hand.
//! An invocation may carry a tenant id, sent as `Lambda-Runtime-Aws-Tenant-Id` as the service does
//! for a function in tenant isolation mode (`TenancyConfig: PER_TENANT`). The benchmark and the
//! tenant-isolation tests share it.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, Mutex};

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<String>>>>;

/// A queued invocation: request id, event, and the tenant id the runtime header carries.
type Queued = (String, String, Option<String>);

pub struct RuntimeApi {
    pub addr: String,
    events: mpsc::Sender<Queued>,
    pending: Pending,
    next_id: std::sync::atomic::AtomicU64,
}

impl RuntimeApi {
    pub async fn start() -> Arc<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the runtime API");
        let addr = listener.local_addr().unwrap().to_string();
        let (tx, rx) = mpsc::channel::<Queued>(1024);
        let rx = Arc::new(Mutex::new(rx));
        let pending: Pending = Arc::default();
        let api = Arc::new(Self {
            addr,
            events: tx,
            pending: pending.clone(),
            next_id: Default::default(),
        });
        let invoker = Arc::downgrade(&api);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(serve(stream, rx.clone(), pending.clone(), invoker.clone()));
            }
        });
        api
    }

    /// Queues `event` and waits for the function's response body.
    pub async fn invoke(&self, event: &str) -> String {
        self.invoke_for_tenant(event, None).await
    }

    /// Queues `event` as an invocation for `tenant` (tenant isolation mode) and waits for the
    /// function's response body.
    pub async fn invoke_for_tenant(&self, event: &str, tenant: Option<&str>) -> String {
        let id = format!(
            "req-{}",
            self.next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let (tx, rx) = oneshot::channel();
        self.pending.lock().await.insert(id.clone(), tx);
        self.events
            .send((id, event.to_owned(), tenant.map(str::to_owned)))
            .await
            .expect("runtime API running");
        rx.await.unwrap_or_default()
    }
}

async fn serve(
    stream: TcpStream,
    events: Arc<Mutex<mpsc::Receiver<Queued>>>,
    pending: Pending,
    invoker: std::sync::Weak<RuntimeApi>,
) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).await.unwrap_or(0) == 0 {
            return;
        }
        let mut content_length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    content_length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; content_length];
        if reader.read_exact(&mut body).await.is_err() {
            return;
        }
        let mut parts = request_line.split_whitespace();
        let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let reply = if method == "GET" && path.ends_with("/runtime/invocation/next") {
            let next = events.lock().await.recv().await;
            let Some((id, event, tenant)) = next else {
                return;
            };
            let tenant_header = tenant
                .map(|t| format!("Lambda-Runtime-Aws-Tenant-Id: {t}\r\n"))
                .unwrap_or_default();
            let deadline = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis()
                + 30_000;
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nLambda-Runtime-Aws-Request-Id: {id}\r\n\
                 Lambda-Runtime-Deadline-Ms: {deadline}\r\nLambda-Runtime-Invoked-Function-Arn: arn:aws:lambda:us-east-1:123456789012:function:bench\r\n\
                 Lambda-Runtime-Trace-Id: Root=1-00000000-000000000000000000000000\r\n{tenant_header}Content-Length: {}\r\n\r\n{event}",
                event.len()
            )
        } else if method == "POST" && path.starts_with("/2015-03-31/functions/") {
            // The Lambda Invoke API (RequestResponse), for a caller such as a local Cognito that
            // invokes its trigger by name: the function on this Runtime API answers.
            let Some(api) = invoker.upgrade() else {
                return;
            };
            let answer = api.invoke(&String::from_utf8_lossy(&body)).await;
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Amz-Executed-Version: $LATEST\r\nContent-Length: {}\r\n\r\n{answer}",
                answer.len()
            )
        } else if method == "POST" && path.contains("/runtime/invocation/") {
            let id = path.split('/').rev().nth(1).unwrap_or_default().to_owned();
            if let Some(tx) = pending.lock().await.remove(&id) {
                let _ = tx.send(String::from_utf8_lossy(&body).into_owned());
            }
            "HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\n{}".to_owned()
        } else {
            "HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\n{}".to_owned()
        };
        if write.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The environment a function binary gets from the Lambda service, pointed at this Runtime API and
/// the local stack: the `AWS_*` variables of this process (endpoints, region, credentials), `PATH`,
/// the local cursor signing key, and the function's own configuration.
pub fn function_env(table: &str, runtime_api: &str, bin: &str) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("AWS_") || k == "PATH" || k == "CURSOR_SIGNING_KEY")
        .collect();
    env.extend([
        ("AWS_LAMBDA_RUNTIME_API".into(), runtime_api.into()),
        ("AWS_LAMBDA_FUNCTION_NAME".into(), bin.into()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE".into(), "128".into()),
        ("AWS_LAMBDA_FUNCTION_VERSION".into(), "$LATEST".into()),
        ("TABLE_NAME".into(), table.into()),
        ("TENANT_ROLE_ARN".into(), crate::ROLE_ARN.into()),
        (
            "TENANT_OPERATOR_ROLE_ARN".into(),
            crate::OPERATOR_ROLE_ARN.into(),
        ),
        ("RUST_LOG".into(), "warn".into()),
    ]);
    if std::env::var_os("CURSOR_SIGNING_KEY").is_none() {
        env.push((
            "CURSOR_SIGNING_KEY".into(),
            "runtime-api-local-cursor-key-0123456789".into(),
        ));
    }
    env
}
