//! A narrowed session of the platform's partition ([`PlatformAccess`]): each action it sends is
//! allowed by one of its statements ([`PlatformAccess::statements`], which its session policy says to
//! IAM): the action, its partition key's prefix, and, where the statement names them, the only
//! attributes the action may name (IAM's `dynamodb:Attributes`: the key's, the item's, and the
//! top-level names of its expressions) and the only `ReturnValues` it may ask for (IAM's
//! `dynamodb:ReturnValues`). Where a statement limits return values, the guard also refuses
//! `ReturnValuesOnConditionCheckFailure`, which IAM has no key for: there it is stricter than IAM.

use std::collections::{BTreeSet, HashMap};

use aws_sdk_dynamodb::operation::{
    delete_item::DeleteItemInput, get_item::GetItemInput, put_item::PutItemInput,
    query::QueryInput, transact_write_items::TransactWriteItemsInput, update_item::UpdateItemInput,
};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use aws_smithy_runtime_api::client::interceptors::context::Input;

use super::{placeholders, GuardViolation, Item};
use crate::identity::ids::TenantId;
use crate::identity::keys::PK;
use crate::isolation::policy::{NarrowedStatement, PlatformAccess};

/// One action of a request as IAM judges it: its name (`dynamodb:…`), its partition keys, the
/// attributes it names (`None`: not modelled, which no attribute-bound statement allows), the
/// `ReturnValues` it asks for, and whether it asks for the item back when its condition fails.
#[derive(Debug)]
struct Judged {
    action: &'static str,
    leading_keys: Vec<String>,
    attributes: Option<BTreeSet<String>>,
    return_values: Option<String>,
    returns_on_failure: bool,
}

/// Refuses `input` unless a statement of `access` allows each of its actions. A session of the whole
/// partition ([`PlatformAccess::All`]) is not narrowed.
pub fn check_platform_access(access: PlatformAccess, input: &Input) -> Result<(), GuardViolation> {
    PlatformNarrowing::of(access).map_or(Ok(()), |narrowing| narrowing.check(input))
}

/// A narrowed platform session's statements, made once with its guard (not per request).
#[derive(Debug, Clone)]
pub(super) struct PlatformNarrowing {
    access: PlatformAccess,
    statements: Vec<NarrowedStatement>,
}

impl PlatformNarrowing {
    /// `None` for [`PlatformAccess::All`]: not narrowed.
    pub(super) fn of(access: PlatformAccess) -> Option<Self> {
        Some(Self {
            access,
            statements: access.statements()?,
        })
    }

    /// Refuses `input` unless one of the statements allows each of its actions.
    pub(super) fn check(&self, input: &Input) -> Result<(), GuardViolation> {
        let access = self.access;
        let refuse = |operation: &'static str, reason: String| GuardViolation {
            tenant: TenantId::PLATFORM.to_owned(),
            operation,
            reason,
        };
        let Some((operation, actions)) = judged(input) else {
            return Err(refuse(
                "unlisted operation",
                format!("not in the {access:?} session's statements"),
            ));
        };
        for action in actions {
            if !self.statements.iter().any(|s| allows(s, &action)) {
                return Err(refuse(
                    operation,
                    format!(
                        "the {access:?} session's statements allow no {} of {:?} naming {:?} \
                         returning {:?} (on a failed condition: {})",
                        action.action,
                        action.leading_keys,
                        action.attributes,
                        action.return_values,
                        action.returns_on_failure
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn allows(statement: &NarrowedStatement, action: &Judged) -> bool {
    statement.actions.contains(&action.action)
        && !action.leading_keys.is_empty()
        && action
            .leading_keys
            .iter()
            .all(|pk| pk.starts_with(&statement.keys))
        && match (&statement.attributes, &action.attributes) {
            (None, _) => true,
            (Some(allowed), Some(named)) => named.iter().all(|a| allowed.contains(&a.as_str())),
            (Some(_), None) => false,
        }
        && statement.return_values.as_ref().is_none_or(|allowed| {
            action
                .return_values
                .as_deref()
                .is_none_or(|asked| allowed.contains(&asked))
                && !action.returns_on_failure
        })
}

/// The actions of `input` as IAM judges them (a transaction: each of its items); `None` for an
/// operation no narrowed session sends.
fn judged(input: &Input) -> Option<(&'static str, Vec<Judged>)> {
    if let Some(i) = input.downcast_ref::<GetItemInput>() {
        let names = Named::new(i.expression_attribute_names())
            .key(i.key())
            .expression(i.projection_expression())
            .legacy(Some(i.attributes_to_get().iter().map(String::as_str)));
        return Some(("GetItem", vec![names.judged("dynamodb:GetItem", i.key())]));
    }
    if let Some(i) = input.downcast_ref::<PutItemInput>() {
        let names = Named::new(i.expression_attribute_names())
            .key(i.item())
            .expression(i.condition_expression())
            .legacy(i.expected().map(|e| e.keys().map(String::as_str)))
            .returning(
                i.return_values(),
                i.return_values_on_condition_check_failure(),
            );
        return Some(("PutItem", vec![names.judged("dynamodb:PutItem", i.item())]));
    }
    if let Some(i) = input.downcast_ref::<UpdateItemInput>() {
        let names = Named::new(i.expression_attribute_names())
            .key(i.key())
            .expression(i.update_expression())
            .expression(i.condition_expression())
            .legacy(i.attribute_updates().map(|a| a.keys().map(String::as_str)))
            .legacy(i.expected().map(|e| e.keys().map(String::as_str)))
            .returning(
                i.return_values(),
                i.return_values_on_condition_check_failure(),
            );
        return Some((
            "UpdateItem",
            vec![names.judged("dynamodb:UpdateItem", i.key())],
        ));
    }
    if let Some(i) = input.downcast_ref::<DeleteItemInput>() {
        let names = Named::new(i.expression_attribute_names())
            .key(i.key())
            .expression(i.condition_expression())
            .legacy(i.expected().map(|e| e.keys().map(String::as_str)))
            .returning(
                i.return_values(),
                i.return_values_on_condition_check_failure(),
            );
        return Some((
            "DeleteItem",
            vec![names.judged("dynamodb:DeleteItem", i.key())],
        ));
    }
    if let Some(i) = input.downcast_ref::<QueryInput>() {
        // Every value its key condition binds counts as a leading key (the guard's key rule). Its
        // attributes are not modelled: no attribute-bound statement allows a Query.
        let values = i.expression_attribute_values();
        let leading_keys = i
            .key_condition_expression()
            .map(placeholders)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|name| values?.get(name)?.as_s().ok().cloned())
            .collect();
        return Some((
            "Query",
            vec![Judged {
                action: "dynamodb:Query",
                leading_keys,
                attributes: None,
                return_values: None,
                returns_on_failure: false,
            }],
        ));
    }
    let transaction = input.downcast_ref::<TransactWriteItemsInput>()?;
    Some(("TransactWriteItems", transaction_actions(transaction)))
}

/// Each item of `transaction` as the action IAM judges it as.
fn transaction_actions(transaction: &TransactWriteItemsInput) -> Vec<Judged> {
    transaction
        .transact_items()
        .iter()
        .filter_map(|t| {
            if let Some(x) = t.put() {
                let names = Named::new(x.expression_attribute_names())
                    .key(Some(x.item()))
                    .expression(x.condition_expression())
                    .returning(None, x.return_values_on_condition_check_failure());
                return Some(names.judged("dynamodb:PutItem", Some(x.item())));
            }
            if let Some(x) = t.update() {
                let names = Named::new(x.expression_attribute_names())
                    .key(Some(x.key()))
                    .expression(Some(x.update_expression()))
                    .expression(x.condition_expression())
                    .returning(None, x.return_values_on_condition_check_failure());
                return Some(names.judged("dynamodb:UpdateItem", Some(x.key())));
            }
            if let Some(x) = t.delete() {
                let names = Named::new(x.expression_attribute_names())
                    .key(Some(x.key()))
                    .expression(x.condition_expression())
                    .returning(None, x.return_values_on_condition_check_failure());
                return Some(names.judged("dynamodb:DeleteItem", Some(x.key())));
            }
            let x = t.condition_check()?;
            let names = Named::new(x.expression_attribute_names())
                .key(Some(x.key()))
                .expression(Some(x.condition_expression()))
                .returning(None, x.return_values_on_condition_check_failure());
            Some(names.judged("dynamodb:ConditionCheckItem", Some(x.key())))
        })
        .collect()
}

/// The top-level attribute names one action names, gathered part by part.
struct Named<'a> {
    placeholders: Option<&'a HashMap<String, String>>,
    names: BTreeSet<String>,
    return_values: Option<String>,
    returns_on_failure: bool,
}

impl<'a> Named<'a> {
    fn new(placeholders: Option<&'a HashMap<String, String>>) -> Self {
        Self {
            placeholders,
            names: BTreeSet::new(),
            return_values: None,
            returns_on_failure: false,
        }
    }

    /// A key's or a whole item's attributes.
    fn key(mut self, item: Option<&Item>) -> Self {
        self.names
            .extend(item.into_iter().flat_map(|i| i.keys().cloned()));
        self
    }

    /// The top-level names of an expression: `#placeholders` resolved, and bare names, but not a
    /// document path's inner parts (`a.b`: `a`), functions, keywords or `:values`. An unresolved
    /// placeholder is named as written, which no statement lists.
    fn expression(mut self, expression: Option<&str>) -> Self {
        for name in expression.map(top_level_names).unwrap_or_default() {
            let resolved = match name.strip_prefix('#') {
                Some(_) => self
                    .placeholders
                    .and_then(|p| p.get(name))
                    .map_or(name, String::as_str),
                None => name,
            };
            self.names.insert(resolved.to_owned());
        }
        self
    }

    /// The names of a legacy parameter (`Expected`, `AttributeUpdates`, `AttributesToGet`).
    fn legacy<'n>(mut self, names: Option<impl Iterator<Item = &'n str>>) -> Self {
        self.names
            .extend(names.into_iter().flatten().map(str::to_owned));
        self
    }

    /// What the action asks to be returned: its `ReturnValues` (`NONE` counts as asked: IAM sees
    /// the parameter), and the item when its condition fails.
    fn returning(
        mut self,
        return_values: Option<&ReturnValue>,
        on_failure: Option<&ReturnValuesOnConditionCheckFailure>,
    ) -> Self {
        self.return_values = return_values.map(|v| v.as_str().to_owned());
        self.returns_on_failure =
            on_failure.is_some_and(|v| *v != ReturnValuesOnConditionCheckFailure::None);
        self
    }

    fn judged(self, action: &'static str, key: Option<&Item>) -> Judged {
        let leading_keys = key
            .and_then(|k| k.get(PK))
            .and_then(|pk| match pk {
                AttributeValue::S(s) => Some(s.clone()),
                _ => None,
            })
            .into_iter()
            .collect();
        Judged {
            action,
            leading_keys,
            attributes: Some(self.names),
            return_values: self.return_values,
            returns_on_failure: self.returns_on_failure,
        }
    }
}

/// The words of DynamoDB's expression grammar that are not attribute names.
const KEYWORDS: [&str; 9] = [
    "SET", "REMOVE", "ADD", "DELETE", "AND", "OR", "NOT", "BETWEEN", "IN",
];

/// The top-level attribute names of `expression`, bare or as `#placeholders`.
fn top_level_names(expression: &str) -> Vec<&str> {
    let bytes = expression.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut names = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        if bytes[i] == b'#' || bytes[i] == b':' || is_word(bytes[i]) {
            i += 1;
            while i < bytes.len() && is_word(bytes[i]) {
                i += 1;
            }
        } else {
            i += 1;
            continue;
        }
        let word = &expression[start..i];
        let nested = expression[..start].trim_end().ends_with('.');
        let called = expression[i..].trim_start().starts_with('(');
        let value = word.starts_with(':');
        let index = word.as_bytes()[0].is_ascii_digit();
        let keyword = KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(word));
        if !(nested || called || value || index || keyword) {
            names.push(word);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expressions_top_level_names_are_its_bare_and_placeholder_names_only() {
        assert_eq!(
            top_level_names("SET #a = :a, b.c = if_not_exists(d, :z) REMOVE e[0], f.#g ADD h :one"),
            ["#a", "b", "d", "e", "f", "h"]
        );
        assert_eq!(
            top_level_names("attribute_not_exists(#closed) AND size(x) > :n OR NOT y IN (:p, :q)"),
            ["#closed", "x", "y"]
        );
    }
}
