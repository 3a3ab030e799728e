//! `schemas list|get|export`: the workflow schemas registered with the server.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::output::{fields, time, Table};
use super::{Ctx, Failure};

/// `schemas` subcommands.
#[derive(Subcommand, Debug)]
pub enum SchemasCommand {
    /// List the registered documents (type, version, signals, when registered).
    List(FilterArgs),
    /// One document: its message, signal, state and reply schemas.
    Get(GetArgs),
    /// The documents as `POST /v1/workflows/schemas` takes them (without `registered_at_ms`):
    /// a JSON array on stdout, or one `<type>-<version>.json` file each with --dir.
    Export(ExportArgs),
}

/// An optional workflow type.
#[derive(Args, Debug)]
pub struct FilterArgs {
    /// Only documents of this workflow type.
    #[arg(long = "type", value_name = "TYPE")]
    workflow_type: Option<String>,
}

/// `schemas get`.
#[derive(Args, Debug)]
pub struct GetArgs {
    /// The workflow type.
    workflow_type: String,
    /// The version.
    version: String,
}

/// `schemas export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    #[command(flatten)]
    filter: FilterArgs,
    /// Write one file per document into this directory (created if missing).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub async fn run(ctx: &Ctx, command: SchemasCommand) -> Result<(), Failure> {
    match command {
        SchemasCommand::List(filter) => list(ctx, filter).await,
        SchemasCommand::Get(args) => get(ctx, args).await,
        SchemasCommand::Export(args) => export(ctx, args).await,
    }
}

async fn list(ctx: &Ctx, filter: FilterArgs) -> Result<(), Failure> {
    let docs = ctx
        .http
        .list_schemas(filter.workflow_type.as_deref())
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.out.json {
        ctx.out.print_json(&json!({ "schemas": docs }));
        return Ok(());
    }
    let mut table = Table::new(&["TYPE", "VERSION", "MESSAGE", "SIGNALS", "REGISTERED"]);
    for doc in &docs {
        let signals: Vec<&str> = doc["signals"]
            .as_object()
            .map(|s| s.keys().map(String::as_str).collect())
            .unwrap_or_default();
        table.row(vec![
            text(&doc["workflow_type"]),
            text(&doc["version"]),
            if doc["message"].is_null() {
                "-"
            } else {
                "checked"
            }
            .into(),
            if signals.is_empty() {
                "-".into()
            } else {
                signals.join(",")
            },
            doc["registered_at_ms"].as_i64().map_or("-".into(), time),
        ]);
    }
    if table.is_empty() {
        println!("no schemas registered");
    } else {
        table.print();
    }
    Ok(())
}

async fn get(ctx: &Ctx, args: GetArgs) -> Result<(), Failure> {
    let doc = ctx
        .http
        .get_schema(&args.workflow_type, &args.version)
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.out.json {
        ctx.out.print_json(&doc);
        return Ok(());
    }
    fields(&[
        (
            "workflow",
            format!("{} {}", text(&doc["workflow_type"]), text(&doc["version"])),
        ),
        (
            "registered",
            doc["registered_at_ms"].as_i64().map_or("-".into(), time),
        ),
    ]);
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    println!("\nmessage:\n{}", pretty(&doc["message"]));
    if let Some(signals) = doc["signals"].as_object() {
        for (name, schema) in signals {
            println!("\nsignal {name}:\n{}", pretty(schema));
        }
    }
    println!("\nstate:\n{}", pretty(&doc["state"]));
    println!("\nreply:\n{}", pretty(&doc["reply"]));
    Ok(())
}

async fn export(ctx: &Ctx, args: ExportArgs) -> Result<(), Failure> {
    let mut docs = ctx
        .http
        .list_schemas(args.filter.workflow_type.as_deref())
        .await
        .map_err(|e| ctx.fail(e))?;
    for doc in &mut docs {
        if let Some(obj) = doc.as_object_mut() {
            obj.remove("registered_at_ms");
        }
    }
    let Some(dir) = args.dir else {
        ctx.out.print_json(&docs);
        return Ok(());
    };
    let io =
        |what: String, e: std::io::Error| Failure::new(super::Exit::Other, format!("{what}: {e}"));
    std::fs::create_dir_all(&dir)
        .map_err(|e| io(format!("cannot create the directory {}", dir.display()), e))?;
    for doc in &docs {
        // Types and versions are identifiers (`A-Z a-z 0-9 _ - .`): no path separators.
        let file = dir.join(format!(
            "{}-{}.json",
            text(&doc["workflow_type"]),
            text(&doc["version"])
        ));
        let body = serde_json::to_string_pretty(doc).unwrap_or_default() + "\n";
        std::fs::write(&file, body)
            .map_err(|e| io(format!("cannot write {}", file.display()), e))?;
        if !ctx.out.json {
            println!("wrote {}", file.display());
        }
    }
    if ctx.out.json {
        ctx.out
            .print_json(&json!({ "exported": docs.len(), "dir": dir }));
    } else if docs.is_empty() {
        println!("no schemas registered: nothing written");
    }
    Ok(())
}

/// `manifest`: the replay manifests workers registered, written as the files a crate commits.
#[derive(Args, Debug)]
pub struct ManifestArgs {
    #[command(flatten)]
    filter: FilterArgs,
    /// The directory to write them to, one `<name>.<version>.json` each (created if missing).
    #[arg(long, value_name = "DIR", default_value = turnwise::manifest::DIR)]
    out: PathBuf,
}

/// Write the registered manifests to `--out`, naming each file written.
pub async fn manifest(ctx: &Ctx, args: ManifestArgs) -> Result<(), Failure> {
    let docs = ctx
        .http
        .list_schemas(args.filter.workflow_type.as_deref())
        .await
        .map_err(|e| ctx.fail(e))?;
    let mut manifests = Vec::new();
    for doc in docs {
        let Some(m) = doc.get("manifest").filter(|m| !m.is_null()) else {
            continue;
        };
        let m = turnwise::manifest::Manifest::from_json(&m.to_string()).map_err(|e| {
            Failure::new(
                super::Exit::Other,
                format!(
                    "the manifest of {} {} on the server: {e}",
                    text(&doc["workflow_type"]),
                    text(&doc["version"])
                ),
            )
        })?;
        manifests.push(m);
    }
    let count = manifests.len();
    let written = turnwise::manifest::files::write_dir(&args.out, manifests)
        .map_err(|e| Failure::new(super::Exit::Other, e.to_string()))?;
    if ctx.out.json {
        ctx.out.print_json(&json!({
            "manifests": count,
            "written": written,
            "dir": args.out,
        }));
    } else if count == 0 {
        println!("no replay manifests registered: nothing written (workers register them with their schemas)");
    } else {
        for file in &written {
            println!("wrote {}", file.display());
        }
        println!(
            "{count} manifest{} in {}, {} changed",
            if count == 1 { "" } else { "s" },
            args.out.display(),
            written.len()
        );
    }
    Ok(())
}

/// A string field, or `?` when the server sent none.
fn text(v: &Value) -> String {
    v.as_str().unwrap_or("?").to_owned()
}
