//! The routes as the integration tests call them: the rows of their dispatch
//! (tests/src/dispatch.rs) and of their typed client (tests/src/client.rs).

use std::fmt::Write as _;

use crate::routes::{Caller, RouteTable};

/// The rows of the tests' dispatch (`tests/src/dispatch.rs`): each route's bin and its handler's
/// module, and the state the handler takes, when it takes one.
pub(super) fn dispatch_rows(table: &RouteTable) -> String {
    let mut s = String::new();
    for r in table.routes() {
        let f = r.function;
        let state = match &f.state {
            Some(state) => format!(" with {}", state_fn(state)),
            None => String::new(),
        };
        let _ = writeln!(
            s,
            "    \"{}\" => {}::{}{state},",
            f.bin,
            f.krate,
            f.module()
        );
    }
    s
}

/// The rows of the tests' typed client (`tests/src/client.rs`): each route's method, named after its
/// function (the bin in snake_case), taking its path parameters in order, and a body when its sample
/// has one.
pub(super) fn client_rows(table: &RouteTable) -> String {
    let mut s = String::new();
    for r in table.routes() {
        let f = r.function;
        let params: Vec<String> = r
            .params()
            .iter()
            .map(|p| format!("{} = \"{p}\"", snake_case(p)))
            .collect();
        let body = if f.sample.body.is_some() {
            " with body"
        } else {
            ""
        };
        let caller = match f.caller {
            Caller::Tenant => "a tenant",
            Caller::Operator => "an operator",
            Caller::Any => "a tenant or an operator",
        };
        let _ = writeln!(
            s,
            "    /// `{} {}` ({caller}).\n    \"{}\" => {}({}){body};",
            r.method,
            r.path,
            f.bin,
            f.module(),
            params.join(", "),
        );
    }
    s
}

/// `productId` → `product_id`, `ImportQueue` → `import_queue`.
fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `imports::ImportQueue` → `import_queue`: the tests' function that builds a route's state.
fn state_fn(state: &str) -> String {
    snake_case(state.rsplit("::").next().unwrap_or(state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_fn_is_the_snake_case_type_name() {
        assert_eq!(state_fn("imports::ImportQueue"), "import_queue");
    }
}
