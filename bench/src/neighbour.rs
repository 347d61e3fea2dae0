//! The premium neighbour of figures 12, 13 and 14: its GetItem of its one product, served as the
//! runtime serves it (quota first), timed alone and then beside another tenant's load.

use std::time::Duration;

use integration::Auth;
use shared::App;

use crate::requests;

/// The neighbour's GetItem 300 times, one after another, with nothing beside it: their times. Each
/// must be served.
pub(crate) async fn alone(app: &App, auth: &Auth) -> Vec<f64> {
    let mut times = Vec::new();
    for _ in 0..300 {
        times.push(read(app, auth).await.expect("the neighbour was refused"));
    }
    times
}

/// The neighbour's GetItem every 5 ms until `done()`: the times of those served, and how many were
/// refused.
pub(crate) async fn beside(app: &App, auth: &Auth, done: impl Fn() -> bool) -> (Vec<f64>, usize) {
    let (mut times, mut refused) = (Vec::new(), 0usize);
    while !done() {
        match read(app, auth).await {
            Some(ms) => times.push(ms),
            None => refused += 1,
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (times, refused)
}

/// One GetItem: its time, or `None` when it was refused.
async fn read(app: &App, auth: &Auth) -> Option<f64> {
    let (ms, status) = requests::get_product_admitted(app, auth, "p-00000").await;
    (status == 200).then_some(ms)
}
