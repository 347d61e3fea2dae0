//! The latency model: a TCP proxy in front of DynamoDB Local that delays every byte by a fixed time
//! in each direction, like the network between a Lambda and DynamoDB in one region.
//!
//! DynamoDB Local answers in well under a millisecond and shares the benchmark's two cores, so
//! without this a scatter-gather figure measures the server's queue. With it, parallel Queries
//! overlap their round trips as they do on separate partitions of the real service.
//!
//! Each direction of a connection is a reader and a writer joined by a channel: the reader stamps
//! each chunk with `arrival + delay`, the writer sleeps until then (a tokio timer, never a busy
//! wait) and writes it. Order is kept, and chunks in flight overlap, as on a link with latency.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

pub struct LatencyProxy {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl LatencyProxy {
    /// Listens on a free local port and forwards every connection to `upstream` (`host:port`),
    /// each direction `one_way` late.
    pub async fn start(upstream: SocketAddr, one_way: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let url = format!("http://{}", listener.local_addr().expect("bound"));
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        let _ = client.set_nodelay(true);
                        let _ = server.set_nodelay(true);
                        let (cr, cw) = client.into_split();
                        let (sr, sw) = server.into_split();
                        tokio::join!(delayed(cr, sw, one_way), delayed(sr, cw, one_way));
                    }
                });
            }
        });
        LatencyProxy { url, task }
    }
}

/// Copies `from` to `to`, each chunk `delay` after it arrived.
async fn delayed<R, W>(mut from: R, mut to: W, delay: Duration)
where
    R: AsyncReadExt + Unpin + Send + 'static,
    W: AsyncWriteExt + Unpin,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    while let Some((due, chunk)) = rx.recv().await {
        tokio::time::sleep_until(due).await;
        if to.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
    reader.abort();
}

/// The `host:port` of an `http://host:port` endpoint URL.
pub fn socket_of(url: &str) -> SocketAddr {
    let host_port = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .replace("localhost", "127.0.0.1");
    host_port.parse().expect("an http://host:port endpoint")
}
