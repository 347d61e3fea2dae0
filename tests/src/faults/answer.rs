//! A DynamoDB error answered in place of one request ([`Faults::answer_next`]).

use super::Faults;

impl Faults {
    /// The next attempt of `operation` never takes effect and is answered with DynamoDB's `error`
    /// (its `__type`'s last part, e.g. `ResourceInUseException`, as for a table being made).
    pub fn answer_next(&self, operation: &str, error: &str) {
        let body = format!(
            r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{error}","message":"injected {error}"}}"#
        );
        *self.answer_once.lock().unwrap() = Some((operation.to_owned(), body));
    }

    /// The answer to give this attempt of `operation`, once, when one is set for it.
    pub(super) fn take_answer(&self, operation: &str) -> Option<String> {
        let mut answer = self.answer_once.lock().unwrap();
        match answer.as_ref() {
            Some((op, _)) if op == operation => answer.take().map(|(_, body)| body),
            _ => None,
        }
    }
}
