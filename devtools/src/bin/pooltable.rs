//! `pooltable`: developer commands for the local stack.
//!
//! - `pooltable create-table <name>`: create the table from template.yaml (admin credentials).
//! - `pooltable dev-token <tenant> [role]`: print an unsigned development JWT.

use devtools::{create_table, default_template_path, table_from_template};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["create-table", name] => {
            let def = table_from_template(&default_template_path())?;
            let sdk = shared::app::load_sdk_config().await;
            let client = aws_sdk_dynamodb::Client::new(&sdk);
            create_table(&client, name, &def).await?;
            println!("created table {name} from template.yaml");
        }
        ["dev-token", tenant] => println!("{}", shared::claims::dev_jwt(tenant, None)),
        ["dev-token", tenant, role] => println!("{}", shared::claims::dev_jwt(tenant, Some(role))),
        _ => {
            eprintln!("usage: pooltable create-table <name> | dev-token <tenant> [role]");
            std::process::exit(2);
        }
    }
    Ok(())
}
