//! Accounts on PostgreSQL, debited by workers in several processes.
//!
//! ```text
//! example-ledger setup  --db URL --accounts N [--cents C]   create the table, N accounts and their instances
//! example-ledger worker --db URL [--id NAME]                 run turns until Ctrl-C, printing each one
//! example-ledger send   --db URL ACCOUNT MESSAGE_ID CENTS    admit a debit
//! example-ledger show   --db URL                             balances, and which worker ran each turn
//! ```
//!
//! `URL` is a PostgreSQL address, e.g. `postgres://postgres@127.0.0.1/turnwise`; every process
//! given the same one works on the same accounts. See docs/postgres.md.

use std::time::Duration;

use example_ledger::{account, Debit, CREATE_ACCOUNTS, CREATE_ENTRIES};
use turnwise::prelude::*;
use turnwise::protocol::{HistoryQuery, ListInstancesQuery};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const USAGE: &str = "usage:
  example-ledger setup  --db URL --accounts N [--cents C]
  example-ledger worker --db URL [--id NAME]
  example-ledger send   --db URL ACCOUNT MESSAGE_ID CENTS
  example-ledger show   --db URL";

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("example-ledger: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("example-ledger: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The value after `--name`, if given.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// The arguments that are neither flags nor flag values.
fn positional(args: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args.iter().skip(1) {
        if skip {
            skip = false;
        } else if a.starts_with("--") {
            skip = true;
        } else {
            out.push(a.as_str());
        }
    }
    out
}

async fn run(args: &[String]) -> Result<(), BoxError> {
    let command = args.first().map(String::as_str).ok_or(USAGE)?;
    let url = flag(args, "--db").ok_or(USAGE)?;
    let engine = Engine::connect(url).await?;
    match command {
        "setup" => {
            let n: u32 = flag(args, "--accounts").ok_or(USAGE)?.parse()?;
            let cents: i64 = flag(args, "--cents").unwrap_or("10000").parse()?;
            setup(&engine, url, n, cents).await
        }
        "worker" => {
            let id = flag(args, "--id")
                .map(str::to_owned)
                .unwrap_or_else(|| format!("ledger-{}", std::process::id()));
            println!("worker {id}: running turns of `account` until Ctrl-C");
            Worker::new(engine)
                .id(id)
                .concurrency(4)
                .claim_wait(Duration::from_secs(10))
                .register(account)
                .run()
                .await?;
            Ok(())
        }
        "send" => {
            let [acct, message_id, cents] = positional(args)[..] else {
                return Err(USAGE.into());
            };
            let cents: i64 = cents.parse()?;
            let turn = account
                .handle(&engine, acct)
                .send(Debit { cents }, message_id)
                .await?;
            println!("admitted {message_id} as turn {} of {acct}", turn.number);
            Ok(())
        }
        "show" => show(&engine, url).await,
        _ => Err(USAGE.into()),
    }
}

async fn setup(engine: &Engine, url: &str, n: u32, cents: i64) -> Result<(), BoxError> {
    // The application's own tables, in the same database (an application would use its
    // migration tool).
    let db = connect(url).await?;
    db.batch_execute(CREATE_ACCOUNTS).await?;
    db.batch_execute(CREATE_ENTRIES).await?;
    for i in 1..=n {
        let id = format!("acct-{i}");
        db.execute(
            "INSERT INTO accounts (id, cents) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&id, &cents],
        )
        .await?;
        account.start(engine, id.as_str()).await?;
        println!("account {id}: {cents} cents");
    }
    Ok(())
}

/// A connection of the application's own.
async fn connect(url: &str) -> Result<tokio_postgres::Client, BoxError> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

async fn show(engine: &Engine, url: &str) -> Result<(), BoxError> {
    let db = connect(url).await?;
    let list = engine
        .list_instances(ListInstancesQuery {
            after: None,
            limit: Some(100),
        })
        .await?;
    for inst in list
        .instances
        .iter()
        .filter(|i| i.workflow_type == "account")
    {
        let row = db
            .query_one(
                "SELECT cents, debits FROM accounts WHERE id = $1",
                &[&inst.id],
            )
            .await?;
        let (cents, debits): (i64, i64) = (row.get(0), row.get(1));
        println!("{}: {cents} cents after {debits} debits", inst.id);
        let history = engine
            .history(HistoryQuery {
                id: inst.id.clone(),
                after: None,
                limit: Some(50),
            })
            .await?;
        for t in &history.turns {
            let worker = t.worker.as_deref().unwrap_or("?");
            println!(
                "  turn {} ({}): balance {}, run by {worker}",
                t.number, t.message_id, t.result
            );
        }
    }
    Ok(())
}
