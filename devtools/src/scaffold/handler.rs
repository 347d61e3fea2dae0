//! The handler a route is scaffolded with: one template per [`Shape`], each going through the
//! shared functions the kind's own routes go through.

use super::{fill, NewRoute, Shape};

pub(super) fn handler_source(new: &NewRoute) -> String {
    let template = match new.shape {
        Shape::Get => GET_HANDLER,
        Shape::List => LIST_HANDLER,
        Shape::Set => SET_HANDLER,
        Shape::Delete => DELETE_HANDLER,
    };
    fill(template, new, &[])
}

const GET_HANDLER: &str = r#"//! `@BIN@`: `@METHOD@ @PATH@` → 200 with the @NAME@'s stored attributes, or 404. One GetItem on
//! the @NAME@'s computed shard (both shards at once while the tenant is re-sharded), through the
//! read the kind's own GET goes through (`shared::service::sharded::get_by_id`).
//!
//! Scaffolded by `pooltable new route --entity @NAME@`: it answers the whole @NAME@. Answer what the
//! route is for, and say so in its routes.yaml `doc`.

use lambda_http::{Body, Request, Response};
use shared::identity::keys::{kind, sharded_entity_key};
use shared::service::sharded::{get_by_id, stored_view};
use shared::{ApiError, App};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
@OPERATOR@
    let key = |t: &_, id: &_, shards| sharded_entity_key(t, kind::@SPACE@, kind::@KIND@, id, shards);
    get_by_id(app, &req, "@ID@", key, stored_view, "No such @NAME@.").await
}
"#;

const LIST_HANDLER: &str = r#"//! `@BIN@`: `GET @PATH@?limit=&cursor=&order=` → `{items, nextCursor}`: the tenant's @NAME@s in id
//! order, gathered from all its @SPACE@ shards at once (both layouts while it is re-sharded), through
//! the listing the kind's own list goes through (`shared::service::sharded::list_page`).
//!
//! Scaffolded by `pooltable new route --entity @NAME@`: it answers each @NAME@ whole. Answer what the
//! route is for, and say so in its routes.yaml `doc`.

use lambda_http::{Body, Request, Response};
use shared::identity::entities;
use shared::service::sharded::{list_page, stored_view};
use shared::store::scatter::{Fanout, ShardedList};
use shared::{ApiError, App};

/// The @NAME@s of the tenant's @SPACE@ shards; the cursors are this route's.
pub const LIST: ShardedList = ShardedList::new(entities::@KIND@, "@BIN@");

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
@OPERATOR@
    list_page(app, &req, LIST, stored_view, Fanout::Parallel).await
}
"#;

const SET_HANDLER: &str = r#"//! `@BIN@`: `@METHOD@ @PATH@` `{field: value, …}` → 200 with the @NAME@, the body's fields set on
//! it, or 404. A consistent read of the @NAME@ wherever the tenant's layout has it, then its write
//! through the layout on condition that nothing wrote it since (`shared::service::sharded::set_fields`:
//! while the tenant is re-sharded the write lands on the new shard, where reads find it).
//!
//! Scaffolded by `pooltable new route --entity @NAME@`: it sets any field but the keys and the
//! bookkeeping, and the kind's own PUT replaces the whole @NAME@, these fields with it. Check the body
//! for what the route is for, and decide its `lost_success` and `transaction` in routes.yaml.

use lambda_http::{Body, Request, Response};
use shared::identity::keys::{kind, sharded_entity_key};
use shared::service::sharded::set_fields;
use shared::{ApiError, App};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
@OPERATOR@
    let key = |t: &_, id: &_, shards| sharded_entity_key(t, kind::@SPACE@, kind::@KIND@, id, shards);
    set_fields(app, &req, "@ID@", key, "No such @NAME@.").await
}
"#;

const DELETE_HANDLER: &str = r#"//! `@BIN@`: `DELETE @PATH@` → 204 or 404. One transaction: the @NAME@'s conditional Delete and its
//! tombstone, so an import accepted before the delete never brings it back (on both shards while
//! the tenant is re-sharded: `shared::store::tenancy::layout::delete_along`), as `delete-product`.
//!
//! Scaffolded by `pooltable new route --entity @NAME@`: it deletes the @NAME@ item only. Delete what
//! hangs on it too, and decide its `lost_success` and `transaction` in routes.yaml.

use lambda_http::{Body, Request, Response};
use shared::identity::keys::{kind, sharded_entity_key};
use shared::service::http::{no_content, path_entity_id};
use shared::store::imports::Tombstone;
use shared::store::tenancy::layout::{self, Keys};
use shared::{ApiError, App};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
@REQUIRE@
    let t = &caller.tenant;
    let id = path_entity_id(&req, "@ID@")?;
    let db = app.db(t).await?;
    let layout = app.directory.layout(&db).await?;
    let keys = Keys::of(layout, |n| sharded_entity_key(t, kind::@SPACE@, kind::@KIND@, &id, n));
    let gone = Tombstone::of(&db, kind::@KIND@, &id).put(app.clock.now_millis())?;
    let deleted = layout::delete_along(&db, layout, &keys, vec![gone]).await?;
    app.read_cache.forget(t, &keys.write);
    if !deleted {
        return Err(ApiError::NotFound("No such @NAME@.".into()));
    }
    Ok(no_content())
}
"#;
