use super::progenitor::code_string;
use super::*;

#[test]
fn the_problem_schema_is_read_whatever_its_members() {
    let mut doc: Value = serde_yaml::from_str(
        "openapi: 3.1.0\npaths: {}\ncomponents:\n  schemas:\n    Problem:\n      type: object\n      required: [title]\n      additionalProperties: false\n      properties: {title: {type: string}}\n",
    )
    .unwrap();
    doc = to_openapi_30(doc).unwrap();
    let problem = &doc["components"]["schemas"]["Problem"];
    assert!(problem.get("required").is_none() && problem.get("additionalProperties").is_none());
    assert_eq!(problem["properties"]["title"]["type"], "string");
}

fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).unwrap()
}

fn convert(text: &str) -> Value {
    to_openapi_30(yaml(text)).unwrap()
}

/// `schema` (flow YAML) converted as `components.schemas.S` of a 3.1 document.
fn schema_30(schema: &str) -> Value {
    let doc = convert(&format!(
        "openapi: 3.1.0\ncomponents: {{schemas: {{S: {schema}}}}}"
    ));
    doc["components"]["schemas"]["S"].clone()
}

#[test]
fn version_becomes_303_and_other_versions_are_refused() {
    assert_eq!(
        convert("openapi: 3.1.0\npaths: {}"),
        yaml("openapi: 3.0.3\npaths: {}")
    );
    assert!(matches!(
        to_openapi_30(yaml("openapi: 3.0.3")),
        Err(Openapi30Error::NotOpenapi31(v)) if v == "3.0.3"
    ));
    assert!(matches!(
        to_openapi_30(yaml("[]")),
        Err(Openapi30Error::NotAMapping)
    ));
}

#[test]
fn root_fields_without_30_equivalent_are_dropped() {
    assert_eq!(
        convert(
            "openapi: 3.1.1\njsonSchemaDialect: x\nwebhooks: {}\n\
             info: {title: t, version: '1', summary: s, license: {name: MIT, identifier: MIT}}"
        ),
        yaml("openapi: 3.0.3\ninfo: {title: t, version: '1', license: {name: MIT}}")
    );
}

#[test]
fn path_item_refs_are_inlined() {
    assert_eq!(
        convert(
            "openapi: 3.1.0\npaths: {/a: {$ref: '#/components/pathItems/A'}}\n\
             components: {pathItems: {A: {get: {operationId: a}}}}"
        ),
        yaml("openapi: 3.0.3\npaths: {/a: {get: {operationId: a}}}\ncomponents: {}")
    );
}

#[test]
fn type_with_null_becomes_nullable() {
    assert_eq!(
        schema_30("{type: [string, 'null'], maxLength: 4}"),
        yaml("{type: string, maxLength: 4, nullable: true}")
    );
    assert_eq!(
        schema_30("{type: 'null'}"),
        yaml("{enum: [null], nullable: true}")
    );
    assert_eq!(
        schema_30("{type: [string, integer]}"),
        yaml("{anyOf: [{type: string}, {type: integer}]}")
    );
}

#[test]
fn null_alternative_becomes_nullable() {
    assert_eq!(
        schema_30("{anyOf: [{type: 'null'}, {type: boolean}, {type: string}]}"),
        yaml("{anyOf: [{type: boolean}, {type: string}], nullable: true}")
    );
    assert_eq!(
        schema_30("{oneOf: [{$ref: '#/components/schemas/T'}, {type: 'null'}]}"),
        yaml("{allOf: [{$ref: '#/components/schemas/T'}], nullable: true}")
    );
}

#[test]
fn const_becomes_enum() {
    assert_eq!(
        schema_30("{const: custom}"),
        yaml("{type: string, enum: [custom]}")
    );
    assert_eq!(
        schema_30("{type: number, const: 0}"),
        yaml("{type: number, enum: [0]}")
    );
}

#[test]
fn numeric_exclusive_bounds_become_boolean_flags() {
    assert_eq!(
        schema_30("{type: number, exclusiveMinimum: 0, exclusiveMaximum: 9.99e+125}"),
        yaml(
            "{type: number, minimum: 0, exclusiveMinimum: true, \
             maximum: 9.99e+125, exclusiveMaximum: true}"
        )
    );
    // With both kinds of bound, the tighter one is kept.
    assert_eq!(
        schema_30("{type: integer, minimum: 5, exclusiveMinimum: 0}"),
        yaml("{type: integer, minimum: 5}")
    );
    assert_eq!(
        schema_30("{type: integer, maximum: 9, exclusiveMaximum: 9}"),
        yaml("{type: integer, maximum: 9, exclusiveMaximum: true}")
    );
    // Already 3.0 (boolean): untouched.
    assert_eq!(
        schema_30("{type: integer, minimum: 0, exclusiveMinimum: true}"),
        yaml("{type: integer, minimum: 0, exclusiveMinimum: true}")
    );
}

#[test]
fn schema_examples_become_one_example_but_parameter_examples_stay() {
    assert_eq!(
        schema_30("{type: string, examples: [eng, ops]}"),
        yaml("{type: string, example: eng}")
    );
    let parameter = "{name: id, in: path, required: true, \
                     schema: {type: string}, examples: {seeded: {value: acme}}}";
    let doc = convert(&format!(
        "openapi: 3.1.0\ncomponents: {{parameters: {{P: {parameter}}}}}"
    ));
    assert_eq!(doc["components"]["parameters"]["P"], yaml(parameter));
}

#[test]
fn ref_siblings() {
    // Annotations beside a schema $ref are dropped (3.0 ignores siblings of $ref anyway)...
    assert_eq!(
        schema_30("{$ref: '#/components/schemas/T', description: d}"),
        yaml("{$ref: '#/components/schemas/T'}")
    );
    // ...constraints are kept, through allOf.
    assert_eq!(
        schema_30("{$ref: '#/components/schemas/T', maxItems: 2}"),
        yaml("{maxItems: 2, allOf: [{$ref: '#/components/schemas/T'}]}")
    );
    // A Reference Object outside schemas keeps its $ref only.
    let doc = convert(
        "openapi: 3.1.0\npaths: {/a: {get: {responses: \
         {'409': {$ref: '#/components/responses/C', description: d}}}}}",
    );
    assert_eq!(
        doc["paths"]["/a"]["get"]["responses"]["409"],
        yaml("{$ref: '#/components/responses/C'}")
    );
}

#[test]
fn keywords_without_30_equivalent() {
    assert_eq!(
        schema_30(
            "{type: object, propertyNames: {minLength: 1}, \
             additionalProperties: {type: integer}}"
        ),
        yaml("{type: object, additionalProperties: {type: integer}}")
    );
    assert_eq!(
        schema_30("{type: string, contentEncoding: base64}"),
        yaml("{type: string, format: byte}")
    );
    assert_eq!(
        schema_30("{type: string, contentMediaType: application/octet-stream}"),
        yaml("{type: string, format: binary}")
    );
    assert_eq!(
        schema_30("{type: array, prefixItems: [{type: string}, {type: integer}], items: false}"),
        yaml("{type: array, maxItems: 2, items: {anyOf: [{type: string}, {type: integer}]}}")
    );
    assert_eq!(
        schema_30("{type: array, items: true}"),
        yaml("{type: array, items: {}}")
    );
    assert!(matches!(
        to_openapi_30(yaml("openapi: 3.1.0\ncomponents: {schemas: {S: {$defs: {}}}}")),
        Err(Openapi30Error::Unsupported { path, keyword: "$defs" })
            if path == "#/components/schemas/S"
    ));
}

#[test]
fn rules_apply_at_any_depth_but_not_inside_extensions() {
    assert_eq!(
        schema_30(
            "{type: object, x-window: {exclusiveMinimum: 0}, properties: \
             {a: {type: array, items: {anyOf: [{const: 0}, {type: 'null'}]}}}}"
        ),
        yaml(
            "{type: object, x-window: {exclusiveMinimum: 0}, properties: \
             {a: {type: array, items: {allOf: [{enum: [0]}], nullable: true}}}}"
        )
    );
}

#[test]
fn progenitor_scalar_ranges_and_any_json() {
    assert_eq!(
        schema_30("{type: number, anyOf: [{const: 0}, {minimum: 1.0e-6, maximum: 1.0e+12}]}"),
        yaml("{type: number}")
    );
    assert_eq!(
        schema_30(
            "{description: d, anyOf: [{type: 'null'}, {type: boolean}, {type: string}, \
             {type: number, anyOf: [{const: 0}, {minimum: 1.0e-130}]}, \
             {type: array, items: {$ref: '#/components/schemas/S'}}, \
             {type: object, additionalProperties: {$ref: '#/components/schemas/S'}}]}"
        ),
        yaml("{description: d}")
    );
    // Not every type: kept.
    assert_eq!(
        schema_30("{anyOf: [{type: 'null'}, {type: string}, {type: integer}]}"),
        yaml("{anyOf: [{type: string}, {type: integer}], nullable: true}")
    );
}

/// A 3.1 document with one operation GET /a whose responses are `responses` (flow YAML) and a
/// shared response Bad (problem+json), converted.
fn operation_30(responses: &str) -> Value {
    convert(&format!(
        "openapi: 3.1.0\npaths: {{/a: {{get: {{responses: {responses}}}}}}}\n\
         components: {{responses: {{Bad: {{description: bad, content: \
         {{application/problem+json: {{schema: {{$ref: '#/components/schemas/Problem'}}}}}}}}}}}}"
    ))
}

#[test]
fn problem_json_is_read_as_json() {
    let doc =
        operation_30("{'200': {description: ok}, '400': {$ref: '#/components/responses/Bad'}}");
    assert_eq!(
        doc["components"]["responses"]["Bad"]["content"],
        yaml("{application/json: {schema: {$ref: '#/components/schemas/Problem'}}}")
    );
}

#[test]
fn responses_of_a_minority_body_kind_are_left_to_unexpected_response() {
    let doc = operation_30(
        "{'200': {description: a, content: {application/json: {schema: {type: string}}}}, \
         '202': {description: b, content: {application/json: {schema: {type: integer}}}}, \
         '204': {description: c}, \
         '400': {$ref: '#/components/responses/Bad'}, \
         '409': {description: d, content: {application/problem+json: \
                {schema: {$ref: '#/components/schemas/Problem'}}}}, \
         '500': {description: e, content: {text/plain: {schema: {type: string}}}}}",
    );
    let responses = doc["paths"]["/a"]["get"]["responses"].as_mapping().unwrap();
    let codes: Vec<String> = responses.keys().map(code_string).collect();
    assert_eq!(codes, ["200", "400", "409"]);
}

#[test]
fn request_body_keeps_one_content_type() {
    let doc = convert(
        "openapi: 3.1.0\npaths: {/a: {post: {responses: {}, requestBody: {content: \
         {text/plain: {schema: {type: string}}, application/json: {schema: {type: object}}}}}}}",
    );
    assert_eq!(
        doc["paths"]["/a"]["post"]["requestBody"]["content"],
        yaml("{application/json: {schema: {type: object}}}")
    );
}
