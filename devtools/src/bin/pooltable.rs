//! `pooltable`: an operator's and a developer's commands (`devtools::cli`; `pooltable --help`).

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = devtools::cli::Cli::parse();
    match devtools::cli::run(cli).await {
        Ok(answer) => {
            if !answer.is_empty() {
                println!("{answer}");
            }
            std::process::ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("pooltable: {}", failure.message);
            std::process::ExitCode::from(failure.exit as u8)
        }
    }
}
