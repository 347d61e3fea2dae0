//! Short names for what the AWS SDK hands an interceptor's hooks ([`Intercept`]), for the store
//! layer's interceptors and the test harness's. (The isolation guard, a layer below, keeps the
//! SDK's names in the one macro that writes its hook.) The SDK spells each hook's context out in
//! full (`&BeforeTransmitInterceptorContextRef<'_>`), so a hook's signature takes six lines and
//! any two hooks read alike; with these names each hook's signature reads on one line, and says
//! what the hook sees: the typed input, the HTTP request, the HTTP response, the output.
//!
//! A context's name stands for the reference the hook is handed, its lifetimes left to the trait:
//! `InputRef` is `&BeforeSerializationInterceptorContextRef<'_>`, `InputMut` is `&mut` the SDK's
//! `...ContextMut<'_>`.

use aws_smithy_runtime_api::client::interceptors::context as sdk;

/// `Parts`: the client's runtime components (the SDK's `RuntimeComponents`), which no pooltable hook
/// reads. `Bag`: the operation's config bag, where one hook leaves state for a later one.
pub use aws_sdk_dynamodb::config::{ConfigBag as Bag, Intercept, RuntimeComponents as Parts};

/// What a hook returns: an error fails the attempt (or the operation) with it.
pub type HookResult = Result<(), aws_smithy_runtime_api::box_error::BoxError>;

/// Before serialization (`read_before_execution`, `read_before_serialization`): the operation's
/// typed input.
pub type InputRef<'a, 'b> = &'a sdk::BeforeSerializationInterceptorContextRef<'b>;
/// Before serialization (`modify_before_serialization`): the typed input, to change.
pub type InputMut<'a, 'b> = &'a mut sdk::BeforeSerializationInterceptorContextMut<'b>;
/// Before an attempt goes out (`read_before_attempt`, `read_before_signing`, `read_after_signing`,
/// `read_before_transmit`): its HTTP request.
pub type RequestRef<'a, 'b> = &'a sdk::BeforeTransmitInterceptorContextRef<'b>;
/// Before an attempt goes out (`modify_before_signing`, `modify_before_transmit`): its HTTP
/// request, to change.
pub type RequestMut<'a, 'b> = &'a mut sdk::BeforeTransmitInterceptorContextMut<'b>;
/// Before an answer is read (`read_after_transmit`, `read_before_deserialization`): its HTTP
/// response.
pub type ResponseRef<'a, 'b> = &'a sdk::BeforeDeserializationInterceptorContextRef<'b>;
/// Before an answer is read (`modify_before_deserialization`): its HTTP response, to change.
pub type ResponseMut<'a, 'b> = &'a mut sdk::BeforeDeserializationInterceptorContextMut<'b>;
/// After an answer is read (`read_after_deserialization`): the output or error, and the response.
pub type OutputRef<'a, 'b> = &'a sdk::AfterDeserializationInterceptorContextRef<'b>;
/// After an attempt or the whole operation ends (`read_after_attempt`, `read_after_execution`).
pub type FinalizerRef<'a, 'b> = &'a sdk::FinalizerInterceptorContextRef<'b>;
