//! A call run aside: on a thread of its own, with a tokio runtime of its own, for a test that holds
//! one of its requests before it is sent (`Faults::hold_next_matching` blocks the sending thread)
//! and goes on meanwhile. No task of the test's own runtime waits behind the blocked thread.

use std::future::Future;
use std::thread::JoinHandle;

/// A call running aside ([`aside`]).
#[derive(Debug)]
pub struct Aside<T>(JoinHandle<T>);

/// Runs the future `call` makes on a thread of its own, with a one-worker runtime of its own.
pub fn aside<T, Fut>(call: impl FnOnce() -> Fut + Send + 'static) -> Aside<T>
where
    T: Send + 'static,
    Fut: Future<Output = T>,
{
    Aside(std::thread::spawn(move || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the call aside")
            .block_on(call())
    }))
}

impl<T: Send + 'static> Aside<T> {
    /// What the call came to, once it has ended (waited for off the test's runtime's workers).
    pub async fn ended(self) -> T {
        tokio::task::spawn_blocking(move || self.0.join())
            .await
            .expect("waiting for the call aside")
            .expect("the call aside panicked")
    }
}
