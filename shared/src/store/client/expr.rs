//! Typed expressions: key conditions, conditions, updates and projections are values built from
//! attribute paths (`dynamodb-expression`), never strings. Each request assembles its parts into one
//! [`Expression`], which names every attribute and value with placeholders of its own (`#0`, `:0`),
//! so two parts never collide and no attribute name is a reserved word. Only the machinery below
//! `store` (the expiry filter of `query::live_page`, the guards that read requests) adds to them.

pub use dynamodb_expression::condition::Condition;
pub use dynamodb_expression::key::KeyCondition;
pub use dynamodb_expression::update::Update;
pub use dynamodb_expression::{Expression, Num, Path};

/// The top-level attribute `name` (a `.` in it is part of the name, never a document path).
pub fn attr(name: &str) -> Path {
    Path::new_name(name)
}

/// The key attribute `name`, for a key condition.
pub fn key(name: &str) -> dynamodb_expression::key::Key {
    attr(name).key()
}

/// A number value (DynamoDB numbers travel as strings; this keeps them numbers in the expression).
pub fn num(n: u64) -> Num {
    Num::new(n)
}

/// `left OR right`, parenthesized so that it binds as one condition inside an `AND`.
pub fn either(left: Condition, right: Condition) -> Condition {
    left.or(right).parenthesize()
}

/// An item is at the key (a condition on the partition key, which every item has).
pub fn exists() -> Condition {
    attr(crate::identity::keys::PK).attribute_exists()
}

/// No item is at the key.
pub fn absent() -> Condition {
    attr(crate::identity::keys::PK).attribute_not_exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_get_placeholders_of_their_own() {
        // GIVEN a condition and an update on the same attribute
        let expression = Expression::builder()
            .with_condition(exists().and(either(
                attr("childCount").attribute_not_exists(),
                attr("childCount").less_than(num(100)),
            )))
            .with_update(attr("childCount").add(num(1)))
            .build();
        // THEN every name and value is a placeholder, the OR bound inside the AND
        assert_eq!(
            expression.condition_expression.as_deref(),
            Some("attribute_exists(#0) AND (attribute_not_exists(#1) OR #1 < :0)")
        );
        assert_eq!(expression.update_expression.as_deref(), Some("ADD #1 :1"));
        let names = expression.expression_attribute_names.unwrap_or_default();
        assert_eq!(names.get("#0").map(String::as_str), Some("PK"));
        assert_eq!(names.get("#1").map(String::as_str), Some("childCount"));
    }
}
