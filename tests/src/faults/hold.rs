//! A request held before it is sent ([`super::Faults::hold_next_matching`]), until the test
//! releases it.

use super::BodyMatch;

/// A request to hold ([`super::Faults::hold_next_matching`]): its match, the signal that one is held,
/// and the release.
#[derive(Debug)]
pub(super) struct Hold {
    pub(super) matches: BodyMatch,
    held: tokio::sync::oneshot::Sender<()>,
    release: std::sync::mpsc::Receiver<()>,
}

/// A request held before it is sent ([`super::Faults::hold_next_matching`]): another request may go
/// first, as a concurrent caller's would.
#[derive(Debug)]
pub struct Held {
    held: tokio::sync::oneshot::Receiver<()>,
    release: std::sync::mpsc::Sender<()>,
}

impl Held {
    /// Waits until the request is held (panics after a minute: it never came).
    pub async fn reached(&mut self) {
        tokio::time::timeout(std::time::Duration::from_secs(60), &mut self.held)
            .await
            .expect("the request to hold was not sent within a minute")
            .expect("the hold was dropped");
    }

    /// Sends the held request on.
    pub fn release(self) {
        let _ = self.release.send(());
    }
}

/// How long a held request waits for its release before it goes on regardless (a test that
/// failed before releasing it never hangs the suite).
const HOLD_AT_MOST: std::time::Duration = std::time::Duration::from_secs(120);

/// A hold of a request matching `matches`, and the test's handle on it.
pub(super) fn pair(matches: BodyMatch) -> (Hold, Held) {
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel();
    let hold = Hold {
        matches,
        held: held_tx,
        release: release_rx,
    };
    let held = Held {
        held: held_rx,
        release: release_tx,
    };
    (hold, held)
}

impl Hold {
    /// Signals the test that the request is held, and blocks this thread until its release.
    pub(super) fn wait(self) {
        let _ = self.held.send(());
        let _ = self.release.recv_timeout(HOLD_AT_MOST);
    }
}
