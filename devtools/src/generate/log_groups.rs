//! One log group per function, with the retention chosen (`LogRetentionDays`): every
//! `AWS::Serverless::Function` of the template, the routes' and the hand-written ones alike, names its
//! own group in `LoggingConfig` (`/pooltable/<Stage>/<bin>`), so the group exists (and is retained,
//! and deleted with the stack) before the function's first line; left implicit, Lambda makes it on
//! first use and keeps it forever.

/// A function resource of the template: its logical id, its `FunctionName` and its `Condition`.
#[derive(Debug, Default, PartialEq, Eq)]
struct FunctionResource {
    resource: String,
    function_name: String,
    condition: Option<String>,
}

/// `template` with each function's `LoggingConfig.LogGroup` after its `FunctionName`, and the
/// groups' resources. A function without a `FunctionName` keeps Lambda's default group.
pub(super) fn add(template: &str) -> (String, String) {
    let mut out = String::with_capacity(template.len() * 2);
    let mut functions: Vec<FunctionResource> = Vec::new();
    let mut current: Option<FunctionResource> = None;
    let mut in_function = false;
    for line in template.split_inclusive('\n') {
        let bare = line.trim_end();
        if let Some(id) = resource_id(bare) {
            functions.extend(current.take().filter(|f| !f.function_name.is_empty()));
            current = Some(FunctionResource {
                resource: id.to_owned(),
                ..FunctionResource::default()
            });
            in_function = false;
        }
        out.push_str(line);
        let Some(resource) = current.as_mut() else {
            continue;
        };
        if bare == "    Type: AWS::Serverless::Function" {
            in_function = true;
        } else if let Some(condition) = bare.strip_prefix("    Condition: ") {
            resource.condition = Some(condition.to_owned());
        } else if let Some(name) = bare.strip_prefix("      FunctionName: ") {
            if in_function {
                resource.function_name = name.to_owned();
                out.push_str(&format!(
                    "      LoggingConfig:\n        LogGroup: !Ref {}Logs\n",
                    resource.resource
                ));
            }
        }
    }
    functions.extend(current.filter(|f| !f.function_name.is_empty()));
    let groups: String = functions.iter().map(log_group).collect();
    (out, groups)
}

/// `Name` of a line `  Name:` (a top-level section's entry, such as a resource).
fn resource_id(line: &str) -> Option<&str> {
    let id = line.strip_prefix("  ")?.strip_suffix(':')?;
    id.chars()
        .all(|c| c.is_ascii_alphanumeric())
        .then_some(id)
        .filter(|id| !id.is_empty())
}

fn log_group(f: &FunctionResource) -> String {
    let condition = f
        .condition
        .as_deref()
        .map(|c| format!("    Condition: {c}\n"))
        .unwrap_or_default();
    // `!Sub "pooltable-${Stage}-x"` names the function; its group is `/pooltable/${Stage}/x`, not
    // Lambda's default `/aws/lambda/pooltable-${Stage}-x`: a stack deployed before the groups were
    // declared has those already (Lambda made them), and making them again would fail the update.
    let group_name = f.function_name.replacen(
        "!Sub \"pooltable-${Stage}-",
        "!Sub \"/pooltable/${Stage}/",
        1,
    );
    format!(
        "  {resource}Logs:
    Type: AWS::Logs::LogGroup
{condition}    Metadata:
      checkov:
        skip:
          - id: CKV_AWS_158
            comment: Encrypted by CloudWatch Logs with its own key; the lines hold no tenant data (no bodies, tokens or path ids).
    DeletionPolicy: Delete
    UpdateReplacePolicy: Delete
    Properties:
      LogGroupName: {group_name}
      RetentionInDays: !Ref LogRetentionDays
",
        resource = f.resource,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_function_gets_its_group_and_keeps_its_condition() {
        // GIVEN two functions, one conditional, and a resource that is not a function
        let template = "Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      FunctionName: not-a-function
  AFunction:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: !Sub \"pooltable-${Stage}-a\"
      CodeUri: functions/a
  BFunction:
    Type: AWS::Serverless::Function
    Condition: Sbt
    Properties:
      FunctionName: !Sub \"pooltable-${Stage}-b\"
  # @generate log-groups
Outputs: {}
";
        // WHEN the groups are added
        let (out, groups) = add(template);
        let out = format!("{out}{groups}");
        // THEN each function names its group, and each group is made, with its condition
        assert_eq!(out.matches("LoggingConfig:").count(), 2, "{out}");
        assert!(out.contains(
            "      FunctionName: !Sub \"pooltable-${Stage}-a\"\n      LoggingConfig:\n        LogGroup: !Ref AFunctionLogs\n"
        ));
        assert!(
            out.contains("  BFunctionLogs:\n    Type: AWS::Logs::LogGroup\n    Condition: Sbt\n")
        );
        assert!(out.contains("LogGroupName: !Sub \"/pooltable/${Stage}/a\""));
        assert!(!out.contains("QueueLogs"));
    }
}
